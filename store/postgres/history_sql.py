"""How a role's messages and a page of the history are read: a role's last
N or its n-th..m-th through the role's own index, and keyset pages of
messages by seq (docs/storage.md, "One index per role", "Short reads").
`reads` runs these statements.

Each checks the tenant's right to read the conversation itself
(`shared_sql.READABLE`), so a short read is one statement.
"""

from __future__ import annotations

from functools import cache

from store.domain.messages import ROLES
from store.postgres.shared_sql import (
    MESSAGE_COLUMNS,
    NO_SEQ_ABOVE,
    PROBE_EVENTS,
    READABLE,
    limit_of,
)

# A role's ordinals `%(first)s`..`%(last)s`, as values the planner cannot see
# into, for the same reason as `limit_of`: a plan made for the call's range
# (a few ordinals of a small conversation) always looked cheaper than the
# reusable one, which estimates the conversation from the whole table, so in
# a database of a few conversations of different sizes every call was
# planned anew, and the planning cost several times the read (docs/storage.md,
# "Short reads").
_ORDINALS_BETWEEN = "m.role_ordinal BETWEEN (SELECT %(first)s) AND (SELECT %(last)s)"


def _of_role(role: str, columns: str, *, conversation: str = "%(cid)s") -> str:
    """`columns` of `role`'s messages this tenant may read, up to the WHERE
    clause's end, for the caller's conditions to follow (AND ...).

    They are found through the role's own index (`uq_messages_role_<role>`,
    `(conversation_id, role_ordinal)`, migration 0012), the role written
    into the statement (one statement per role), not passed as a parameter:
    a partial index serves only a statement that names its role, and a
    reusable plan for a parameter could not. `conversation`: the
    conversation's id as the statement compares it (`role_range` hides it
    from the planner).
    """
    return (
        f"SELECT {columns} FROM messages AS m{PROBE_EVENTS}"
        f" WHERE m.conversation_id = {conversation} AND m.role = {_role_literal(role)}"
        f" AND {READABLE}"
    )


def _role_literal(role: str) -> str:
    """`role` written into a statement, so that its partial index serves it
    (`_of_role`): only a known role, never text from outside."""
    if role not in ROLES:  # validated by the repository
        raise ValueError(f"unknown role {role!r}")
    return f"'{role}'"


@cache
def recent_in_history(role: str) -> str:
    """The last `%(n)s` messages of `role` in the whole history.

    Within the ordinals `%(first)s`..`%(last)s`, which the caller passes as
    every ordinal there is (`ALL_ORDINALS`): hidden from the planner like
    the LIMIT, the range keeps the conversation's size out of the plan's
    cost, so PostgreSQL reuses the plan from the sixth call on
    (`test_listing_plans`).
    """
    return (
        f"SELECT * FROM ({_of_role(role, f'{MESSAGE_COLUMNS}, m.role_ordinal AS ordinal')}"
        f" AND {_ORDINALS_BETWEEN}"
        " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
        f" ORDER BY m.role_ordinal DESC {limit_of('n')}) AS recent ORDER BY ordinal"
    )


# Every ordinal a role can have: the range `recent_in_history` reads.
ALL_ORDINALS = {"first": 1, "last": 2**62}


@cache
def role_range(role: str) -> str:
    """`role`'s messages `%(first)s`..`%(last)s` (ordinals, 1-based).

    The conversation, too, is hidden from the planner: with it, a plan made
    for a small conversation always looked cheaper than the reusable one.
    Hidden, both estimate a few rows of an index range (the ordinals), and
    the plan is reused from the sixth call on (`test_listing_plans`).
    """
    return (
        f"{_of_role(role, MESSAGE_COLUMNS, conversation='(SELECT %(cid)s::uuid)')}"
        f" AND {_ORDINALS_BETWEEN} ORDER BY m.role_ordinal"
    )


# The order of a page whose branches each come in their own order.
_PAGE_KEY = ", m.seq AS page_key"


@cache
def history(
    *,
    descending: bool,
    visible: bool = False,
    role: str | None = None,
    agent: bool = False,
    kind: bool = False,
) -> str:
    """A keyset page of messages by seq: the primary key (conversation_id,
    seq) walked from either end, so "the last N" reads N rows (more when a
    filter skips some). `visible` keeps the members of its agent's current
    batch: those that arrived in it, and those carried into it (a
    primary-key probe of `batch_carried` per other row; a message's sort
    key is its key there). A page of one `role` of the whole history walks
    that role's index instead (`_of_role_from_cursor`). One statement shape
    per filter combination, so each plan fits its filters (no `param IS
    NULL OR ...` generic plans). It checks that the tenant may read the
    conversation (READABLE), so a page is one statement."""
    conditions = [
        "m.conversation_id = %(cid)s",
        "m.seq > %(after)s",
        "m.seq < %(before)s",
        READABLE,
    ]
    if role is not None:
        conditions.append(f"m.role = {_role_literal(role)}")
    if agent:
        conditions.append("m.agent_id = %(agent)s")
    if kind:
        conditions.append("m.kind = %(kind)s")
    source = "messages AS m"
    if visible:
        # In the window of its own agent.
        source = "conversations AS c JOIN messages AS m ON m.conversation_id = c.id"
        batch = "coalesce((c.agent_batches ->> m.agent_id)::int, c.current_batch)"
        conditions.append(
            f"c.id = %(cid)s AND (m.batch = {batch} OR EXISTS (SELECT 1 FROM batch_carried AS b"
            f" WHERE b.conversation_id = m.conversation_id AND b.batch = {batch}"
            " AND b.sort_key = m.sort_key AND b.seq = m.seq))"
        )
    direction = " DESC" if descending else ""
    where = f" WHERE {' AND '.join(conditions)} ORDER BY m.seq{direction} {limit_of('limit')}"
    if role is None or visible:
        return f"SELECT {MESSAGE_COLUMNS} FROM {source}{PROBE_EVENTS}{where}"
    by_seq = f"SELECT {MESSAGE_COLUMNS}{_PAGE_KEY} FROM {source}{PROBE_EVENTS}{where}"
    return _of_role_from_cursor(role, conditions, by_seq, direction)


def _cursor_ordinal(role: str, param: str, unbounded: str, ordinal: str) -> str:
    """The `role` ordinal of the message at seq `%(param)s` (the cursor),
    `ordinal` when the cursor is `unbounded`, NULL when no message of the
    role is there."""
    return (
        f"CASE WHEN {unbounded} THEN {ordinal} ELSE (SELECT o.role_ordinal FROM messages AS o"
        f" WHERE o.conversation_id = %(cid)s AND o.seq = %({param})s"
        f" AND o.role = {_role_literal(role)}) END"
    )


def _of_role_from_cursor(role: str, conditions: list[str], by_seq: str, direction: str) -> str:
    """A page of `role`'s messages through the role's own index
    (`uq_messages_role_<role>`), between the ordinals of the page's cursors.

    Within a role, ordinals grow with seq, so the role's index walked from
    the cursor's ordinal is the page in seq order, N rows read. Walking the
    primary key and skipping the other roles read the history between the
    role's messages: a page of a rare role (system messages, or tool
    results in a chat without tools) read the whole history. A cursor is
    the seq of the previous page's last message, a message of the role; a
    cursor that is not (any seq a caller passes) has no ordinal, and that
    page walks the primary key as before (`by_seq`)."""
    lower = _cursor_ordinal(role, "after", "%(after)s < 1", "0")
    upper = _cursor_ordinal(role, "before", f"%(before)s >= {NO_SEQ_ABOVE}", str(NO_SEQ_ABOVE))
    bounded = "(SELECT low IS NOT NULL AND high IS NOT NULL FROM cursor_ordinals)"
    by_ordinal = (
        f"SELECT {MESSAGE_COLUMNS}{_PAGE_KEY} FROM messages AS m{PROBE_EVENTS}"
        f" WHERE {' AND '.join(conditions)}"
        " AND m.role_ordinal > (SELECT low FROM cursor_ordinals)"
        " AND m.role_ordinal < (SELECT high FROM cursor_ordinals)"
        f" ORDER BY m.role_ordinal{direction} {limit_of('limit')}"
    )
    return (
        f"WITH cursor_ordinals AS MATERIALIZED (SELECT {lower} AS low, {upper} AS high)"
        f" SELECT * FROM ((SELECT * FROM ({by_ordinal}) AS branch WHERE {bounded})"
        f" UNION ALL (SELECT * FROM ({by_seq}) AS branch WHERE NOT {bounded})) AS page"
        f" ORDER BY page_key{direction}"
    )
