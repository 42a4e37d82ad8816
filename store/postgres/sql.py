"""Every statement the PostgreSQL storage sends, named and kept together.

Hand-written SQL rather than SQLAlchemy Core on the storage's path: these
run on every append and read, psycopg prepares each at its first use, and
their exact shape matters for locking (`LOCK_STREAM`) and for round trips
(`append_cte`). The feed's statements live with their argument, in
`store.postgres.feed`. Placeholders are psycopg's `%(name)s`.

A message's body is stored once, in its `message_appended` event; the
views hold columns and point at the event (`messages.event_version`) and at
its latest edit (`messages.edit_version`). `MESSAGE_COLUMNS` is how every
read gets a message back: its row, its body and, if edited, the new content.
"""

from __future__ import annotations

from functools import cache

from store.domain.messages import ROLES

# --- the stream row -------------------------------------------------------------

# The stream row, not an event: DO NOTHING here only means "it exists".
CREATE_STREAM = (
    "INSERT INTO conversations (id, tenant, key) VALUES (%(cid)s, %(tenant)s, %(key)s)"
    " ON CONFLICT (id) DO NOTHING"
)

# Locks the stream row for this transaction (writers of one conversation
# queue here; other conversations are not touched) and returns what every
# decision starts from: the version, the views' head (next seq, current
# batch, each role's message count), the transaction's time. A statement
# that waited for the lock re-reads the locked row, so all of it is as the
# previous writer committed it.
LOCK_STREAM = (
    "SELECT tenant, version, deleted_at IS NOT NULL, archived_at IS NOT NULL,"
    " next_seq, current_batch, role_counts, now(), agent_batches"
    " FROM conversations WHERE id = %(cid)s FOR UPDATE"
)

# The main agent's current batch (what `Conversation.current_batch` reports):
# its own, once it has run a batch operation, else the conversation's first.
MAIN_BATCH = "coalesce((agent_batches ->> 'main')::int, current_batch)"

_CONVERSATION_COLUMNS = (
    f"tenant, version, deleted_at IS NOT NULL, {MAIN_BATCH}, next_seq,"
    " archived_at IS NOT NULL, created_at, metadata, updated_at, key"
)
CONVERSATION = f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = %(cid)s"

# The check of CONVERSATION (`_check_readable` in storage.py) as a condition,
# for a read that carries it in its own statement: its rows come back only
# when `tenant` may read the conversation. One probe of the primary key,
# evaluated once; an empty answer is told apart (missing, deleted, or just
# an empty page) by reading CONVERSATION after all.
READABLE = (
    "EXISTS (SELECT FROM conversations AS readable WHERE readable.id = %(cid)s"
    " AND readable.tenant = %(tenant)s AND readable.version <> 0"
    " AND readable.deleted_at IS NULL)"
)

# --- messages ---------------------------------------------------------------------


def _limit_of(param: str) -> str:
    """The LIMIT of a short read, as a value the planner cannot see into.

    With a plain parameter, a plan made for the call's value (say 50 rows)
    always looked cheaper than the reusable one (which assumes a tenth of
    the rows), so PostgreSQL planned every call anew: 0.6-2 ms, more than
    the read. As a subquery it is unknown to both, and from the sixth call
    on the prepared statement's plan is reused.
    """
    return f"LIMIT (SELECT %({param})s)"


# A role's ordinals `%(first)s`..`%(last)s`, as values the planner cannot see
# into, for the same reason as `_limit_of`: a plan made for the call's range
# (a few ordinals of a small conversation) always looked cheaper than the
# reusable one, which estimates the conversation from the whole table, so in
# a database of a few conversations of different sizes every call was
# planned anew (0.25 ms and more of planning on a 0.05 ms read).
_ORDINALS_BETWEEN = "m.role_ordinal BETWEEN (SELECT %(first)s) AND (SELECT %(last)s)"


# The events' JSON comes back whole (`json` is returned as stored: no
# server-side rendering, which for `jsonb` was half of a 5,000-row read);
# the reader takes the message (or an edit's content) out of it.
#
# An edit's content is looked up only for an edited message: a CASE around a
# probe by key, not a join. Most messages are never edited, and as a join
# the planner hashed the conversation's events a second time for a whole
# window (~2 ms of a 5,000-message read's 9 on the server), or probed the
# key with a null for every row of a short read.
_EDIT = (
    "CASE WHEN m.edit_version IS NOT NULL THEN (SELECT ed.data FROM events AS ed"
    " WHERE ed.conversation_id = m.conversation_id AND ed.version = m.edit_version) END"
)
MESSAGE_COLUMNS = (
    f"m.seq, m.batch, m.role_ordinal, m.token_estimate, e.recorded_at, e.data, {_EDIT}, m.pinned"
)

# Each message's event, in one of two ways (docs/operations.md, "Statistics"):
# - joined as the planner sees fit, for the read of a whole history never
#   compacted (a 5,000-message window is hash-joined: 1.5-4 ms less than a
#   probe per message, when the statistics know the conversation);
# - probed by key, one look-up a message, whatever the statistics say, for
#   every read that is bounded (a page, a role's range, a few messages by
#   seq or client id). A join planned from statistics that did not know the
#   conversation yet read its events once per message: the last 50 of a
#   6,000-message conversation took 40 ms instead of 0.6.
# Joined, a 5,000-message window hashes the events, bodies and all (the
# planner costs rows, not bytes, and there are as many events as messages).
# Tried and taken back: an always-true condition on the messages that the
# statistics cannot estimate, `(m.seq + 0) > 0`, so they look smaller and
# are hashed: 4.1 -> 2.7 ms of server time at 5,000 messages, but at 100,000
# (where the planner hashes the messages by itself, in parallel) one
# agent's window went 76 -> 88 ms and every agent's 82 -> 149 ms.
_JOINED_EVENTS = (
    " JOIN events AS e ON e.conversation_id = m.conversation_id AND e.version = m.event_version"
)
_PROBE_EVENTS = (
    " JOIN LATERAL (SELECT e.recorded_at, e.data FROM events AS e"
    " WHERE e.conversation_id = m.conversation_id AND e.version = m.event_version"
    " OFFSET 0) AS e ON true"
)  # OFFSET 0: it stays a probe per message, not a join the planner may hash

# Each agent has a window (docs/storage.md, "A window per agent"): the
# batch in `conversations.agent_batches` once it has run a batch operation,
# else `conversations.current_batch`, where every agent's window starts. A
# batch of one agent holds only its messages; the first batch (and every
# batch recorded before 0007) holds every agent's, so an agent's window is
# always "its batch's members that are its messages".
_BATCH_OF_AGENT = (
    "(SELECT coalesce((agent_batches ->> %(agent)s::text)::int, current_batch)"
    " FROM conversations WHERE id = %(cid)s)"
)
# Every agent's window at once (no agent named): the batches the windows
# are in, and of each, the messages of the agents whose window it is.
_EVERY_WINDOW = (
    "c.id = %(cid)s"
    " AND b.batch = ANY(c.current_batch || ARRAY(SELECT w.value::int"
    " FROM jsonb_each_text(c.agent_batches) AS w))"
    " AND b.batch = coalesce((c.agent_batches ->> m.agent_id)::int, c.current_batch)"
)
# A batch's members come from two places (migration 0011; docs/storage.md,
# "Batch membership"): the messages that arrived in it, each a member by its
# own row, and those a batch operation carried over into it
# (`batch_carried`). A read of members is a branch per source, with the
# same conditions on `b` (the member: batch, sort key, seq) and `m` (its
# message). In the arrivals' branch `b` is the message's own row, which the
# planner flattens into `m`: `b.batch = …` and `ORDER BY b.sort_key` walk
# `ix_messages_batch`, with no second visit of `messages`. (The view
# `batch_members`, both sources in one, is for people's queries: no statement
# here reads it.)
_ARRIVED = (
    "messages AS m CROSS JOIN LATERAL (SELECT m.conversation_id, m.batch, m.sort_key, m.seq) AS b"
)

# Carried members are a compacted window: read member by member, each
# message by its key, whatever the statistics say (a join planned for "one
# row" read the whole conversation once per member; docs/operations.md,
# "Statistics").
_CARRIED = (
    "batch_carried AS b JOIN LATERAL (SELECT m.* FROM messages AS m"
    " WHERE m.conversation_id = b.conversation_id AND m.seq = b.seq OFFSET 0) AS m ON true"
)
_SOURCES = (_ARRIVED, _CARRIED)


def _joined(source: str, on: str | None, joins: str) -> str:
    """A member source, joined to the conversation's row `c` `on` a
    condition if given, then `joins`."""
    if on is None:
        return f"{source}{joins}"
    return f"conversations AS c JOIN ({source}) ON {on}{joins}"


# A branch: (FROM, WHERE conditions, gate).
Branch = tuple[str, list[str], str]


def _from_each_source(
    conditions: list[str],
    gate: str,
    *,
    on: str | None = None,
    bodies: bool = True,
    by_key: bool = False,
) -> list[Branch]:
    """One branch per member source, under the same gate; with `bodies`,
    each message's event joined. The arrivals' events are joined as the
    planner sees fit (a whole history's window is hash-joined), or, `by_key`,
    probed row by row: what a read walks a few rows of, or reads after a
    compaction, stays a look-up whatever the statistics say. The carried
    members' are always probed."""
    arrived = (_PROBE_EVENTS if by_key else _JOINED_EVENTS) if bodies else ""
    carried = _PROBE_EVENTS if bodies else ""
    return [
        (_joined(_ARRIVED, on, arrived), conditions, gate),
        (_joined(_CARRIED, on, carried), conditions, gate),
    ]


def _window_conditions(*, batch: bool, agent: bool) -> tuple[str | None, list[str]]:
    """The join to the conversation's row (None: none needed) and the
    conditions of a window: batch `%(batch)s` (of agent `%(agent)s`, if
    `agent`), else agent `%(agent)s`'s current window, else every agent's
    current window."""
    on, conditions = None, ["b.conversation_id = %(cid)s"]
    if batch:
        conditions.append("b.batch = %(batch)s")
    elif agent:
        conditions.append(f"b.batch = {_BATCH_OF_AGENT}")
    else:
        on = "b.conversation_id = c.id"
        conditions.append(_EVERY_WINDOW)
    if agent:
        conditions.append("m.agent_id = %(agent)s")
    return on, conditions


@cache
def window(*, batch: bool, agent: bool, page: bool = False) -> str:
    """A window in window order; `page`: from past `%(after)s`, at most
    `%(limit)s`, each with its sort key (the next page's cursor)."""
    if not batch and not agent:
        return _every_window(page=page)
    if not batch:
        if not page:
            raise ValueError("an agent's whole window: AGENT_WINDOW, once its batch is known")
        return _agent_window_page(_WINDOW_OUTPUT)
    on, conditions = _window_conditions(batch=batch, agent=agent)
    return _one_of(_from_each_source(conditions, "true", on=on), _WINDOW_OUTPUT, page=page)


# Every agent's window, in two branches of which one runs: while no agent has
# a window of its own (`agent_batches` empty, the usual case) it is the
# current batch, a plain index range; else each message's own agent decides.
# One statement for both read the agent map per row and misled the planner
# (it expected a handful of rows, and probed `events` 5,000 times for a
# 5,000-message window): 20 ms of server time, against 12 ms now.
_NO_OWN_WINDOWS = "agent_batches = '{}'::jsonb"
# The gate of that branch, and its batch as an index condition.
_NO_OWN = f"(SELECT {_NO_OWN_WINDOWS} FROM conversations WHERE id = %(cid)s)"
_IN_CURRENT_BATCH = "b.batch = (SELECT current_batch FROM conversations WHERE id = %(cid)s)"
_EVERY_WINDOW_COLUMNS = (
    "m.seq, m.batch, m.role_ordinal, m.token_estimate, e.recorded_at, e.data AS body,"
    f" {_EDIT} AS edit, m.pinned, b.sort_key AS window_key"
)
# What a window read returns: `MESSAGE_COLUMNS`, by the names above (and, last,
# the window key: see `_one_of`).
_WINDOW_OUTPUT = "seq, batch, role_ordinal, token_estimate, recorded_at, body, edit, pinned"


def _gated(branches: list[Branch], columns: str, tail: str = "") -> str:
    """Branches of which only those whose gate holds run, as one UNION ALL:
    each `SELECT columns FROM ... WHERE ...tail` under its gate, a test
    evaluated once before the branch starts (a one-time filter above it),
    so a branch whose gate is false never starts. `tail`: the branch's
    ORDER BY/LIMIT, or OFFSET 0 to keep the planner from flattening it into
    the gate's level."""
    return " UNION ALL ".join(
        f"(SELECT * FROM (SELECT {columns} FROM {from_} WHERE {' AND '.join(conditions)}{tail})"
        f" AS branch WHERE {gate})"
        for from_, conditions, gate in branches
    )


def _one_of(branches: list[Branch], output: str, *, page: bool) -> str:
    """A window read as gated branches (`_gated`).

    `page`: from past `%(after)s`, at most `%(limit)s`, in window order,
    `window_key` last.
    Else the whole window, in no order, its key in the last two columns:
    the reader sorts it (`store.postgres.storage._in_window_order`). Sorted
    here, the bodies' wide rows were copied into a sort and the server sent
    nothing until the last was read: ~3 ms of server time and ~5 ms of a
    5,000-message read, against ~2 ms to load the keys and sort rows that
    mostly arrive in order (one pass of Python's sort). The key is sent as
    the message's seq (an integer), and its sort key only where the two
    differ (an inserted message's, between two seqs): a numeric per row
    became a Decimal per row, ~1.5 ms of a 5,000-message read."""
    after, limit = [], ""
    if page:
        # Each branch stops at the page's end too: an index range, not the window.
        after = ["b.sort_key > %(after)s"]
        output, limit = f"{output}, window_key", " ORDER BY b.sort_key LIMIT %(limit)s"
    union = _gated(
        [(from_, [*conditions, *after], gate) for from_, conditions, gate in branches],
        _EVERY_WINDOW_COLUMNS,
        f"{limit} OFFSET 0",
    )
    if not page:
        return (
            f"SELECT {output}, seq AS window_seq, nullif(window_key, seq) AS window_inserted"
            f" FROM ({union}) AS windows"
        )
    return f"SELECT {output} FROM ({union}) AS windows ORDER BY window_key LIMIT %(limit)s"


def _every_window(*, page: bool) -> str:
    on, own = _window_conditions(batch=False, agent=False)
    shared = ["c.id = %(cid)s", f"c.{_NO_OWN_WINDOWS}"]
    return _one_of(
        [
            *_from_each_source(
                shared, _NO_OWN, on="b.conversation_id = c.id AND b.batch = c.current_batch"
            ),
            # Every agent's window once some agent has its own: usually a
            # compacted window or two, so read by key.
            *_from_each_source(own, f"NOT {_NO_OWN}", on=on, by_key=True),
        ],
        _WINDOW_OUTPUT,
        page=page,
    )


# An agent's current window is read one of two ways, by the batch it is in.
# Batch 1 (no batch operation yet): the window is all of the agent's
# history, read as one range and hash-joined; batch 1 is never carried into,
# so its members are its arrivals. A later batch: usually a compaction's few
# hundred messages in a long history, read member by member in window order
# (index probes). The planner cannot tell the two apart: it sees only "some
# batch of this conversation" and estimated half of it, which for a
# 302-message window in 20,000 messages was a hash join over all 20,000
# (23 ms, against 1.6 ms member by member).
def _first_batch(gate: str) -> Branch:
    conditions = ["b.conversation_id = %(cid)s", "b.batch = 1", "m.agent_id = %(agent)s"]
    return (f"{_ARRIVED}{_JOINED_EVENTS}", conditions, gate)


def _later_batch(batch: str, gate: str) -> list[Branch]:
    conditions = ["b.conversation_id = %(cid)s", f"b.batch = {batch}", "m.agent_id = %(agent)s"]
    return _from_each_source(conditions, gate, by_key=True)


def _agent_window_page(output: str) -> str:
    """A page of the agent's window, in one statement: both ways as gated
    branches, of which only the one for the agent's batch runs."""
    return _one_of(
        [
            _first_batch(f"{_BATCH_OF_AGENT} = 1"),
            *_later_batch(_BATCH_OF_AGENT, f"{_BATCH_OF_AGENT} <> 1"),
        ],
        output,
        page=True,
    )


# A whole window is read once its batch is known (`CONVERSATION_OF_AGENT`
# read first): the statement for that batch alone, `%(batch)s` for a later
# one, rather than the gated branches a page uses (docs/storage.md,
# "Whole-window reads", says what that saves and costs).
def agent_window_of(output: str, *, first: bool) -> str:
    """Agent `%(agent)s`'s whole window, in no order (`_one_of`), when its
    batch is 1 (`first`) or `%(batch)s`."""
    branches = [_first_batch("true")] if first else _later_batch("%(batch)s", "true")
    return _one_of(branches, output, page=False)


# CONVERSATION and, last, the batch agent `%(agent)s`'s window is in.
CONVERSATION_OF_AGENT = (
    f"SELECT {_CONVERSATION_COLUMNS}, coalesce((agent_batches ->> %(agent)s::text)::int,"
    " current_batch) FROM conversations WHERE id = %(cid)s"
)


def _every_window_branches(conditions: list[str], *, bodies: bool) -> list[Branch]:
    """Every agent's windows, `conditions` added, as gated branches (as
    `_every_window`): the current batch, walked along its key, while no
    agent has a window of its own (the usual case); else the general form,
    where each message's own agent decides its batch (the planner reads it
    whole). With `bodies`, each message's event, probed by key."""
    return [
        *_from_each_source(
            ["b.conversation_id = %(cid)s", _IN_CURRENT_BATCH, *conditions],
            _NO_OWN,
            bodies=bodies,
            by_key=True,
        ),
        *_from_each_source(
            ["b.conversation_id = %(cid)s", _EVERY_WINDOW, *conditions],
            f"NOT {_NO_OWN}",
            on="b.conversation_id = c.id",
            bodies=bodies,
            by_key=True,
        ),
    ]


@cache
def recent_in_window(*, agent: bool) -> str:
    """The last `%(n)s` messages of role `%(role)s` of the current window(s),
    walking the window backwards: a handful of rows are read, not the window."""
    role = ["m.role = %(role)s"]
    if agent:
        on, conditions = _window_conditions(batch=False, agent=True)
        branches = _from_each_source([*conditions, *role], "true", on=on, by_key=True)
    else:
        branches = _every_window_branches(role, bodies=True)
    last = f" ORDER BY b.sort_key DESC {_limit_of('n')}"
    union = _gated(branches, f"{MESSAGE_COLUMNS}, b.sort_key AS window_key", last)
    return (
        f"SELECT * FROM (SELECT * FROM ({union}) AS recent WHERE {READABLE}"
        f" ORDER BY window_key DESC {_limit_of('n')}) AS recent ORDER BY window_key"
    )


# What a batch operation decides on: the window's entries, bodies included
# (a filter reads the text). It runs once per operation, so every row is read
# by its key (a probe each), whatever the statistics say: a conversation they
# do not know yet is estimated at a row or two, and a join planned for that
# read a 20,000-message conversation once per message, past the statement
# timeout (docs/operations.md, "Statistics").
_ENTRY_COLUMNS = f"b.seq, b.sort_key, m.role, m.agent_id, m.tool_call_id, e.data, {_EDIT}"
_ENTRY_CONDITIONS = (
    "b.conversation_id = %(cid)s AND b.batch = %(batch)s"
    " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
)
WINDOW_ENTRIES = (
    " UNION ALL ".join(
        f"SELECT {_ENTRY_COLUMNS} FROM {source}{_PROBE_EVENTS} WHERE {_ENTRY_CONDITIONS}"
        for source in _SOURCES
    )
    + " ORDER BY 2"
)

# Whose window a batch is (NULL: every agent's); no row: no such batch.
BATCH_OWNER = "SELECT agent_id FROM batches WHERE conversation_id = %(cid)s AND batch = %(batch)s"


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
        f"SELECT {columns} FROM messages AS m{_PROBE_EVENTS}"
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
        f" ORDER BY m.role_ordinal DESC {_limit_of('n')}) AS recent ORDER BY ordinal"
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


# Each role's count is kept in the stream row (`role_counts`, in ROLES order).
COUNT_IN_HISTORY = "SELECT role_counts FROM conversations WHERE id = %(cid)s"

# Each role's count in every agent's current window: O(window), the rows of
# the members and `messages` only (no bodies).
COUNT_IN_WINDOW = (
    "SELECT role, count(*) FROM ("
    + _gated(_every_window_branches([], bodies=False), "m.role", " OFFSET 0")
    + ") AS windows GROUP BY role"
)


# A keyset cursor's "no bound above": higher than any seq.
NO_SEQ_ABOVE = 2**62
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
    where = f" WHERE {' AND '.join(conditions)} ORDER BY m.seq{direction} {_limit_of('limit')}"
    if role is None or visible:
        return f"SELECT {MESSAGE_COLUMNS} FROM {source}{_PROBE_EVENTS}{where}"
    by_seq = f"SELECT {MESSAGE_COLUMNS}{_PAGE_KEY} FROM {source}{_PROBE_EVENTS}{where}"
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
        f"SELECT {MESSAGE_COLUMNS}{_PAGE_KEY} FROM messages AS m{_PROBE_EVENTS}"
        f" WHERE {' AND '.join(conditions)}"
        " AND m.role_ordinal > (SELECT low FROM cursor_ordinals)"
        " AND m.role_ordinal < (SELECT high FROM cursor_ordinals)"
        f" ORDER BY m.role_ordinal{direction} {_limit_of('limit')}"
    )
    return (
        f"WITH cursor_ordinals AS MATERIALIZED (SELECT {lower} AS low, {upper} AS high)"
        f" SELECT * FROM ((SELECT * FROM ({by_ordinal}) AS branch WHERE {bounded})"
        f" UNION ALL (SELECT * FROM ({by_seq}) AS branch WHERE NOT {bounded})) AS page"
        f" ORDER BY page_key{direction}"
    )


BATCH_MESSAGES = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{_PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s AND m.batch = %(batch)s ORDER BY m.seq"
)

MESSAGE_BY_SEQ = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{_PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s AND m.seq = %(seq)s"
)

MESSAGES_BY_CLIENT_ID = (
    f"SELECT {MESSAGE_COLUMNS}, m.client_message_id FROM messages AS m{_PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s AND m.client_message_id = ANY(%(ids)s)"
)

MESSAGES_WRITTEN_BY = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{_PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s"
    " AND m.event_version BETWEEN %(first)s AND %(last)s ORDER BY m.seq"
)

# The assembler's input: the agent's window, bodies only (and each one's key).
ASSEMBLY_WINDOW = {first: agent_window_of("body, edit", first=first) for first in (True, False)}
# `visible_window(agent_id=...)`: the agent's window as StoredMessage rows.
AGENT_WINDOW = {first: agent_window_of(_WINDOW_OUTPUT, first=first) for first in (True, False)}

# The nearest sort keys around `key`: the nearest ordinary message (its key
# is its seq: the primary key) or inserted one (the partial index), whichever
# is nearer.
KEY_AFTER = (
    "SELECT least("
    "(SELECT min(sort_key) FROM messages"
    "  WHERE conversation_id = %(cid)s AND sort_key > %(key)s AND sort_key <> seq),"
    "(SELECT seq FROM messages WHERE conversation_id = %(cid)s AND seq > %(key)s"
    "  AND sort_key = seq ORDER BY seq LIMIT 1))"
)
KEY_BEFORE = (
    "SELECT greatest("
    "(SELECT max(sort_key) FROM messages"
    "  WHERE conversation_id = %(cid)s AND sort_key < %(key)s AND sort_key <> seq),"
    "(SELECT seq FROM messages WHERE conversation_id = %(cid)s AND seq < %(key)s"
    "  AND sort_key = seq ORDER BY seq DESC LIMIT 1))"
)

# --- tool calls, batches, agents ----------------------------------------------------

CALL_STATES = (
    "SELECT call_id, agent_id, status = 'complete' FROM tool_calls"
    " WHERE conversation_id = %(cid)s AND call_id = ANY(%(ids)s)"
)

PENDING_CALLS = (
    "SELECT call_id FROM tool_calls WHERE conversation_id = %(cid)s AND status = 'pending'"
    " AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)"
)

# A call's arguments stay in the assistant message's event.
TOOL_BLOCKS = (
    "SELECT t.call_id, t.tool_name,"
    " (SELECT c -> 'arguments' FROM json_array_elements(e.data -> 'message' -> 'tool_calls') AS c"
    "  WHERE c ->> 'id' = t.call_id LIMIT 1),"
    " t.agent_id, t.assistant_seq, t.result_seq, t.status, t.is_error"
    " FROM tool_calls AS t"
    " JOIN messages AS m ON m.conversation_id = t.conversation_id AND m.seq = t.assistant_seq"
    " JOIN events AS e ON e.conversation_id = m.conversation_id AND e.version = m.event_version"
    " WHERE t.conversation_id = %(cid)s"
    " AND (NOT %(pending)s OR t.status = 'pending')"
    " AND (%(agent)s::text IS NULL OR t.agent_id = %(agent)s)"
    " ORDER BY t.assistant_seq, t.call_id"
)

BATCHES = (
    "SELECT batch, boundary, summary_seq, retained, operation, parameters, started_at, agent_id"
    " FROM batches WHERE conversation_id = %(cid)s ORDER BY batch"
)

PROFILE = (
    "SELECT is_sub_agent, system_prompt, role_definition FROM agent_profiles"
    " WHERE conversation_id = %(cid)s AND agent_id = %(agent)s"
)

SLOTS = (
    "SELECT slot, value FROM context_slots WHERE conversation_id = %(cid)s AND agent_id = %(agent)s"
)

# --- idempotency ---------------------------------------------------------------------

REQUEST = (
    "SELECT request_hash, first_version, last_version FROM append_requests"
    " WHERE conversation_id = %(cid)s AND idempotency_key = %(key)s"
)

# --- writing ---------------------------------------------------------------------------

# Rows travel as one JSON array per table (`json_to_recordset`): a handful
# of parameters whatever the append holds, and JSON is what Python encodes
# fastest (a dozen typed arrays cost more to adapt than the rest of an append).
# A guarded append's rows also name their conversation (`cid`): it writes
# any number of conversations in one statement (`store.postgres.group_commit`).
_EVENT_COLUMNS = "version bigint, type text, data json"
_MESSAGE_COLUMNS = (
    "seq bigint, event_version bigint, role_ordinal bigint, batch int, token_estimate int,"
    " is_error bool, sort_key numeric, role text, agent_id text, kind text, tool_call_id text,"
    " client_message_id text"
)
_CALL_COLUMNS = (
    "call_id text, agent_id text, tool_name text, assistant_seq bigint, result_seq bigint,"
    " is_error bool"
)
_ANSWER_COLUMNS = "call_id text, result_seq bigint, is_error bool"
_REQUEST_COLUMNS = "key text, hash text, first bigint, last bigint"
_HEAD_COLUMNS = (
    "cid uuid, expected bigint, version bigint, next_seq bigint, current_batch int,"
    " role_counts bigint[], key text, client_ids text[]"
)


# The head's update in a guarded append (below): the rows written are joined to it.
_GUARD = "hd"


def _rows(param: str, columns: str, *, guarded: bool) -> str:
    """The rows of JSON parameter `param` as a relation `x`; a guarded
    append's only where its conversation's head was updated (`hd`)."""
    if not guarded:
        return f"json_to_recordset(%({param})s::json) AS x({columns})"
    return (
        f"json_to_recordset(%({param})s::json) AS x(cid uuid, {columns})"
        f" JOIN {_GUARD} ON {_GUARD}.id = x.cid"
    )


# What an append writes from each JSON parameter: `{cid}` is its
# conversation (a parameter; a guarded append's rows name theirs), `{rows}`
# the parameter's rows (`_rows`).
_APPEND_WRITES = {
    "events": (
        "INSERT INTO events (conversation_id, version, type, data)"
        " SELECT {cid}, x.version, x.type, x.data FROM {rows}",
        _EVENT_COLUMNS,
    ),
    "messages": (
        "INSERT INTO messages (conversation_id, seq, event_version, role_ordinal, batch,"
        " token_estimate, is_error, sort_key, role, agent_id, kind, tool_call_id,"
        " client_message_id) SELECT {cid}, x.seq, x.event_version, x.role_ordinal, x.batch,"
        " x.token_estimate, x.is_error, x.sort_key, x.role, x.agent_id, x.kind, x.tool_call_id,"
        " x.client_message_id FROM {rows}",
        _MESSAGE_COLUMNS,
    ),
    "calls": (
        "INSERT INTO tool_calls (conversation_id, call_id, agent_id, tool_name, assistant_seq,"
        " result_seq, is_error, status) SELECT {cid}, x.call_id, x.agent_id, x.tool_name,"
        " x.assistant_seq, x.result_seq, coalesce(x.is_error, false),"
        " CASE WHEN x.result_seq IS NULL THEN 'pending' ELSE 'complete' END FROM {rows}",
        _CALL_COLUMNS,
    ),
    "answers": (
        "UPDATE tool_calls AS t SET result_seq = x.result_seq, status = 'complete',"
        " is_error = x.is_error FROM {rows}"
        " WHERE t.conversation_id = {cid} AND t.call_id = x.call_id",
        _ANSWER_COLUMNS,
    ),
}


def _append_write(param: str, *, guarded: bool) -> str:
    template, columns = _APPEND_WRITES[param]
    return template.format(
        cid="x.cid" if guarded else "%(cid)s", rows=_rows(param, columns, guarded=guarded)
    )


INSERT_EVENTS = _append_write("events", guarded=False)
INSERT_MESSAGES = _append_write("messages", guarded=False)
INSERT_CALLS = _append_write("calls", guarded=False)
ANSWER_CALLS = _append_write("answers", guarded=False)

# An append never moves an agent's window, so HEAD_UPDATE (the hot path)
# leaves `agent_batches` alone; a batch operation, a fork or a rebuild sets it.
SET_AGENT_BATCHES = "UPDATE conversations SET agent_batches = %(agent_batches)s WHERE id = %(cid)s"

HEAD_UPDATE = (
    "UPDATE conversations SET version = %(version)s, next_seq = %(next_seq)s,"
    " current_batch = %(current_batch)s, role_counts = %(role_counts)s::bigint[],"
    " updated_at = now()"
    " WHERE id = %(cid)s"
)

# A rebuild replays what was written: the head moves, the time of the last
# write (`updated_at`) does not.
REBUILD_HEAD_UPDATE = HEAD_UPDATE.replace(", updated_at = now()", "")

REQUEST_INSERT = (
    "INSERT INTO append_requests"
    " (conversation_id, idempotency_key, request_hash, first_version, last_version)"
    " VALUES (%(cid)s, %(key)s, %(hash)s, %(first)s, %(last)s)"
)


# Optimistic appends (docs/storage.md, "Appends in one round trip") are
# decided on the row as their writer remembers it, and sent as one
# statement in autocommit — the appends to any number of conversations
# together (`store.postgres.group_commit`). Its first part (`lk`) locks the
# heads' rows that are free, skipping any another transaction holds (that
# conversation's append is decided again the way that waits for the lock,
# and does not hold up the others; nor can two such statements deadlock).
# `hd` updates each locked head still at the version its append was decided
# on (`expected`; in READ COMMITTED checked on the row as it is now) and,
# with an idempotency key or client message ids, only if none was used
# before; every other part writes only the rows of the heads it updated
# (joined to `hd`, which also orders the heads' updates before every insert).
# The statement answers the conversations written and the transaction's
# time; an append whose conversation is not among them wrote nothing.
_HEADS = f"json_to_recordset(%(heads)s::json) AS h({_HEAD_COLUMNS})"
_LOCK_HEADS = (
    "SELECT id FROM conversations WHERE id IN"
    " (SELECT cid FROM json_to_recordset(%(heads)s::json) AS h(cid uuid))"
    " FOR NO KEY UPDATE SKIP LOCKED"
)
_NEW_REQUEST = (
    " AND (h.key IS NULL OR NOT EXISTS (SELECT 1 FROM append_requests AS r"
    " WHERE r.conversation_id = h.cid AND r.idempotency_key = h.key))"
)
_NEW_CLIENT_IDS = (
    " AND (h.client_ids IS NULL OR NOT EXISTS (SELECT 1 FROM messages AS m"
    " WHERE m.conversation_id = h.cid AND m.client_message_id = ANY(h.client_ids)))"
)
_GUARDED_HEAD_UPDATE = (
    "UPDATE conversations AS c SET version = h.version, next_seq = h.next_seq,"
    " current_batch = h.current_batch, role_counts = h.role_counts, updated_at = now()"
    f" FROM {_HEADS} WHERE c.id = h.cid AND c.id IN (SELECT id FROM lk)"
    " AND c.version = h.expected"
)
_REQUESTS_AFTER_HEADS = (
    "INSERT INTO append_requests"
    " (conversation_id, idempotency_key, request_hash, first_version, last_version)"
    " SELECT x.cid, x.key, x.hash, x.first, x.last"
    f" FROM {_rows('requests', _REQUEST_COLUMNS, guarded=True)}"
)


@cache
def append_cte(
    *,
    with_messages: bool,
    calls: bool,
    answers: bool,
    request: bool,
    guarded: bool = False,
    client_ids: bool = False,
) -> str:
    """One statement for a whole write of appended messages: events, message
    rows (a message's row is also its membership of the batch it arrives
    in, and its role's index entry), tool calls, the stream's version and
    head, the idempotency request.

    Data-modifying CTEs all run to completion whether or not the outer query
    reads them, in one statement: one Bind/Execute on the wire instead of
    one per table, with one plan cached per shape (at most 32 shapes). They cannot
    see each other's rows, which is why a call answered in the same append
    is inserted answered (`store.domain.projector.AppendMessages`).

    `guarded`: the optimistic appends of any number of conversations
    (above), each row naming its conversation; `request` and `client_ids`
    say whether any of them has an idempotency key or client ids.
    """
    assert guarded or not client_ids, "client ids are checked under the lock"
    parts = []
    if guarded:
        new = (_NEW_REQUEST if request else "") + (_NEW_CLIENT_IDS if client_ids else "")
        parts.append(("lk", _LOCK_HEADS))
        parts.append((_GUARD, f"{_GUARDED_HEAD_UPDATE}{new} RETURNING c.id, now() AS at"))
    parts.append(("ev", _append_write("events", guarded=guarded)))
    if with_messages:
        parts.append(("ms", _append_write("messages", guarded=guarded)))
    if calls:
        parts.append(("tc", _append_write("calls", guarded=guarded)))
    if answers:
        parts.append(("ta", _append_write("answers", guarded=guarded)))
    if request:
        parts.append(("rq", _REQUESTS_AFTER_HEADS if guarded else REQUEST_INSERT))
    ctes = ", ".join(f"{name} AS ({statement})" for name, statement in parts)
    if guarded:
        return f"WITH {ctes} SELECT id, at FROM {_GUARD}"
    return f"WITH {ctes} {HEAD_UPDATE}"


# --- the other projection steps -----------------------------------------------------------

START_VIEWS = (
    "INSERT INTO batches (conversation_id, batch, boundary, operation, started_at, event_version)"
    " VALUES (%(cid)s, 1, 0, 'conversation_started', %(at)s, %(version)s)"
)
SET_METADATA = "UPDATE conversations SET metadata = %(metadata)s WHERE id = %(cid)s"

EDIT_MESSAGE = (
    "UPDATE messages SET edit_version = %(version)s, token_estimate = %(tokens)s"
    " WHERE conversation_id = %(cid)s AND seq = %(seq)s"
)

INSERT_BATCH = (
    "INSERT INTO batches (conversation_id, batch, boundary, summary_seq, retained, operation,"
    " parameters, started_at, event_version, agent_id) VALUES (%(cid)s, %(batch)s,"
    " %(boundary)s, %(summary)s, %(retained)s, %(operation)s, %(parameters)s, %(at)s,"
    " %(version)s, %(agent)s)"
)

# The new batch shows, out of the source batch's window, the tail from the
# boundary on and the retained messages — of its agent, when it is one
# agent's window: O(source batch). They are carried over as rows of their
# own; what arrives in the new batch later is a member by its own row.
COPY_MEMBERS = "INSERT INTO batch_carried (conversation_id, batch, sort_key, seq) " + (
    " UNION ALL ".join(
        f"SELECT b.conversation_id, %(batch)s, b.sort_key, b.seq FROM {source}"
        " WHERE b.conversation_id = %(cid)s AND b.batch = %(source)s"
        " AND (b.sort_key >= %(boundary)s OR b.seq = ANY(%(retained)s))"
        " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
        for source in _SOURCES
    )
)

PIN_MESSAGE = (
    "UPDATE messages SET pinned = %(pinned)s WHERE conversation_id = %(cid)s AND seq = %(seq)s"
)

UPSERT_PROFILE = (
    "INSERT INTO agent_profiles (conversation_id, agent_id, is_sub_agent, system_prompt,"
    " role_definition, event_version) VALUES (%(cid)s, %(agent)s, %(sub)s, %(prompt)s,"
    " %(role)s, %(version)s) ON CONFLICT ON CONSTRAINT pk_agent_profiles DO UPDATE SET"
    " is_sub_agent = excluded.is_sub_agent, system_prompt = excluded.system_prompt,"
    " role_definition = excluded.role_definition, event_version = excluded.event_version"
)

UPSERT_ROLE_DEFINITION = (
    "INSERT INTO agent_profiles (conversation_id, agent_id, is_sub_agent, role_definition,"
    " event_version) VALUES (%(cid)s, %(agent)s, %(sub)s, %(role)s, %(version)s)"
    " ON CONFLICT ON CONSTRAINT pk_agent_profiles DO UPDATE SET"
    " role_definition = excluded.role_definition, event_version = excluded.event_version"
)

UPSERT_SLOT = (
    "INSERT INTO context_slots (conversation_id, agent_id, slot, value, event_version)"
    " VALUES (%(cid)s, %(agent)s, %(slot)s, %(value)s, %(version)s)"
    " ON CONFLICT ON CONSTRAINT pk_context_slots DO UPDATE SET"
    " value = excluded.value, event_version = excluded.event_version"
)

DELETE_SLOT = (
    "DELETE FROM context_slots WHERE conversation_id = %(cid)s AND agent_id = %(agent)s"
    " AND slot = %(slot)s"
)

ARCHIVE = "UPDATE conversations SET archived_at = %(at)s WHERE id = %(cid)s"

# --- forks (docs/storage.md, "Forks") ---

# The parent, share-locked until the fork commits: no write to it meanwhile,
# so everything the fork reads of it is of one version.
FORK_PARENT = (
    "SELECT tenant, version, deleted_at IS NOT NULL, next_seq FROM conversations"
    " WHERE id = %(parent)s FOR SHARE"
)
_FORKED = (
    "m.conversation_id = %(parent)s AND m.seq <= %(up_to)s"
    " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
)
# How many messages a fork gets, its last seq, how many are pinned, and of
# each role (in ROLES order).
FORK_COUNTS = (
    "SELECT count(*), coalesce(max(m.seq), 0), count(*) FILTER (WHERE m.pinned),"
    " count(*) FILTER (WHERE m.role = 'system'), count(*) FILTER (WHERE m.role = 'user'),"
    " count(*) FILTER (WHERE m.role = 'assistant'), count(*) FILTER (WHERE m.role = 'tool')"
    f" FROM messages AS m WHERE {_FORKED}"
)
# Each copied message, with the batch of its agent's window at the fork
# point and whether that window shows it (`store.repository.port.fork_windows`).
# The window at the fork point is the agent's (or every agent's) latest
# batch started before the parent's next message after `up_to` was
# appended: at the parent's last message, its current window (a compaction
# right before the fork counts).
FORK_WINDOWS = (
    f"WITH agents AS (SELECT DISTINCT m.agent_id FROM messages AS m WHERE {_FORKED}),"
    " windows AS (SELECT a.agent_id, (SELECT max(b.batch) FROM batches AS b"
    " WHERE b.conversation_id = %(parent)s AND (b.agent_id = a.agent_id OR b.agent_id IS NULL)"
    " AND b.event_version < coalesce((SELECT n.event_version FROM messages AS n"
    " WHERE n.conversation_id = %(parent)s AND n.seq > %(up_to)s ORDER BY n.seq LIMIT 1),"
    " 2147483647)) AS batch FROM agents AS a)"
    " SELECT m.agent_id, m.seq, m.sort_key, w.batch, coalesce(m.batch = w.batch, false) OR EXISTS"
    " (SELECT 1 FROM batch_carried AS b WHERE b.conversation_id = m.conversation_id"
    " AND b.batch = w.batch AND b.sort_key = m.sort_key AND b.seq = m.seq)"
    " FROM messages AS m JOIN windows AS w ON w.agent_id = m.agent_id"
    f" WHERE {_FORKED}"
)
FORK_PROFILES = (
    "SELECT agent_id, is_sub_agent, system_prompt, role_definition FROM agent_profiles"
    " WHERE conversation_id = %(parent)s AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)"
    " ORDER BY agent_id"
)
FORK_SLOTS = (
    "SELECT agent_id, slot, value FROM context_slots WHERE conversation_id = %(parent)s"
    " AND (%(agent)s::text IS NULL OR agent_id = %(agent)s) ORDER BY agent_id, slot"
)

# A fork's messages, copied in one statement, server side: each message of
# the parent up to the seq (of the agent) becomes a `message_appended`
# event of the fork, in seq order from version %(first)s — the body as the
# parent reads it now (an edited message with its new content and token
# estimate), in batch 1, with its seq and sort key — and a pinned one also
# a `message_pinned` event after them; with the rows the projector derives
# from exactly those events (role ordinals counted again, calls answered
# only by a result the fork has). The event JSON is spelled as
# `MessageAppended.data()` / `MessagePinned.data()` write it: a rebuild of
# the fork replays these events and must derive the same rows.
COPY_FORKED = (
    "WITH src AS MATERIALIZED (SELECT m.seq, m.sort_key, m.role, m.agent_id, m.kind,"
    " m.tool_call_id, m.is_error, m.client_message_id, m.token_estimate, m.pinned,"
    " e.recorded_at, %(first)s - 1 + row_number() OVER (ORDER BY m.seq) AS version,"
    " row_number() OVER (PARTITION BY m.role ORDER BY m.seq) AS ordinal,"
    " '{\"seq\":' || m.seq || ',\"batch\":1'"
    " || CASE WHEN m.sort_key <> m.seq THEN ',\"sort_key\":\"' || m.sort_key || '\"' ELSE '' END"
    " || ',\"message\":' || CASE WHEN ed.data IS NULL THEN (e.data -> 'message')::text"
    " ELSE ((e.data -> 'message')::jsonb || jsonb_build_object('content', ed.data -> 'content',"
    " 'token_estimate', m.token_estimate))::text END || '}' AS data"
    " FROM messages AS m"
    " JOIN events AS e ON e.conversation_id = m.conversation_id AND e.version = m.event_version"
    " LEFT JOIN events AS ed"
    " ON ed.conversation_id = m.conversation_id AND ed.version = m.edit_version"
    f" WHERE {_FORKED}),"
    " ev AS (INSERT INTO events (conversation_id, version, type, data, recorded_at)"
    " SELECT %(cid)s, version, 'message_appended', data::json, recorded_at FROM src),"
    " pn AS (INSERT INTO events (conversation_id, version, type, data)"
    " SELECT %(cid)s, %(first)s + %(count)s - 1 + row_number() OVER (ORDER BY seq),"
    " 'message_pinned', ('{\"seq\":' || seq || ',\"pinned\":true}')::json FROM src WHERE pinned),"
    " ms AS (INSERT INTO messages (conversation_id, seq, event_version, role_ordinal, batch,"
    " token_estimate, is_error, sort_key, role, agent_id, kind, tool_call_id, client_message_id,"
    " pinned) SELECT %(cid)s, seq, version, ordinal, 1, token_estimate, is_error, sort_key, role,"
    " agent_id, kind, tool_call_id, client_message_id, pinned FROM src)"
    " INSERT INTO tool_calls (conversation_id, call_id, agent_id, tool_name, assistant_seq,"
    " result_seq, is_error, status)"
    " SELECT %(cid)s, t.call_id, t.agent_id, t.tool_name, t.assistant_seq, a.result_seq,"
    " coalesce(a.is_error, false), CASE WHEN a.result_seq IS NULL THEN 'pending'"
    " ELSE 'complete' END FROM tool_calls AS t CROSS JOIN LATERAL (SELECT"
    " CASE WHEN t.result_seq <= %(up_to)s THEN t.result_seq END AS result_seq,"
    " CASE WHEN t.result_seq <= %(up_to)s THEN t.is_error END AS is_error) AS a"
    " WHERE t.conversation_id = %(parent)s AND t.assistant_seq <= %(up_to)s"
    " AND (%(agent)s::text IS NULL OR t.agent_id = %(agent)s)"
)

# Every projection table, for a purge or a rebuild.
VIEW_TABLES = (
    "messages",
    "batches",
    "batch_carried",
    "tool_calls",
    "agent_profiles",
    "context_slots",
)
DELETE_VIEWS = tuple(f"DELETE FROM {t} WHERE conversation_id = %(cid)s" for t in VIEW_TABLES)
RESET_HEAD = (
    "UPDATE conversations SET next_seq = 1, current_batch = 1, role_counts = '{0,0,0,0}',"
    " agent_batches = '{}', archived_at = NULL WHERE id = %(cid)s"
)

PURGE = (
    "DELETE FROM append_requests WHERE conversation_id = %(cid)s",
    "DELETE FROM events WHERE conversation_id = %(cid)s",
    "UPDATE conversations SET deleted_at = now(), metadata = '{}' WHERE id = %(cid)s",
)

# --- the log ----------------------------------------------------------------------------

EVENTS_AFTER = (
    "SELECT version, recorded_at, type, data FROM events"
    " WHERE conversation_id = %(cid)s AND version > %(after)s ORDER BY version LIMIT %(limit)s"
)

CONVERSATION_IDS = "SELECT id FROM conversations ORDER BY id"

# --- listing conversations ----------------------------------------------------------------

# `key` is the client's id (store.domain.conversation_keys); `id`, the stream's
# uuid, is the tie-breaker the cursor carries.
LIST_COLUMNS = (
    f"key, tenant, version, {MAIN_BATCH}, next_seq, archived_at IS NOT NULL,"
    " created_at, metadata, updated_at, id"
)


@cache
def list_conversations(
    *,
    newest: bool,
    metadata: bool,
    archived: bool | None,
    created_from: bool,
    created_to: bool,
    updated_from: bool,
    updated_to: bool,
    after: bool,
) -> str:
    """A page of a tenant's conversations by (created_at, id), one shape per
    filter combination. The order and the cursor are one range of the index
    (tenant, created_at, id); metadata containment can use the GIN index
    (jsonb_path_ops); updated_at is filtered, not indexed (see
    `store.domain.listing`)."""
    conditions = ["tenant = %(tenant)s", "version > 0", "deleted_at IS NULL"]
    if metadata:
        conditions.append("metadata @> %(metadata)s")
    if archived is not None:
        conditions.append(f"archived_at IS {'NOT ' if archived else ''}NULL")
    if created_from:
        conditions.append("created_at >= %(created_from)s")
    if created_to:
        conditions.append("created_at < %(created_to)s")
    if updated_from:
        conditions.append("updated_at >= %(updated_from)s")
    if updated_to:
        conditions.append("updated_at < %(updated_to)s")
    if after:
        conditions.append(
            f"(created_at, id) {'<' if newest else '>'} (%(after_at)s, %(after_id)s::uuid)"
        )
    direction = " DESC" if newest else ""
    return (
        f"SELECT {LIST_COLUMNS} FROM conversations AS c WHERE {' AND '.join(conditions)}"
        f" ORDER BY c.created_at{direction}, c.id{direction} LIMIT %(limit)s"
    )


# --- compaction (store.compaction) ---

# A window never holds more messages than this, read from the stream row and
# its current batch's row alone: every member of a batch is retained, or has
# a seq at or past the boundary (a sort key is never above its message's seq,
# and whatever arrives in the batch gets a seq past it). With a message
# threshold only, it rules most conversations out before any message is read.
_WINDOW_BOUND = "c.next_seq - floor(cb.boundary) + jsonb_array_length(cb.retained)"
_AGENT_BATCH = "coalesce((c.agent_batches ->> %(agent)s::text)::int, c.current_batch)"


def compaction_candidates(*, max_messages: bool, max_tokens: bool, after: bool) -> str:
    """A page of a tenant's writable conversations whose agent's current window
    (its batch's members that are its messages) is over a threshold, by
    (created_at, id): the window's size is counted over those members
    (O(window), never the history), and only for conversations the head
    columns do not rule out."""
    conditions = [
        "c.tenant = %(tenant)s",
        "c.version > 0",
        "c.deleted_at IS NULL",
        "c.archived_at IS NULL",
    ]
    if after:
        conditions.append("(c.created_at, c.id) > (%(after_at)s, %(after_id)s::uuid)")
    if max_messages and not max_tokens:
        conditions.append(f"{_WINDOW_BOUND} > %(max_messages)s")
    over = []
    if max_messages:
        over.append("w.messages > %(max_messages)s")
    if max_tokens:
        over.append("w.tokens > %(max_tokens)s")
    conditions.append(f"({' OR '.join(over) or 'false'})")
    return (
        "SELECT c.key, c.version, c.created_at, c.id, w.messages, w.tokens"
        " FROM conversations AS c"
        f" JOIN batches AS cb ON cb.conversation_id = c.id AND cb.batch = {_AGENT_BATCH}"
        " CROSS JOIN LATERAL (SELECT count(*) AS messages,"
        " coalesce(sum(token_estimate), 0) AS tokens FROM ("
        + " UNION ALL ".join(
            f"SELECT m.token_estimate FROM {source} WHERE b.conversation_id = c.id"
            " AND b.batch = cb.batch AND m.agent_id = %(agent)s"
            for source in _SOURCES
        )
        + ") AS members) AS w"
        f" WHERE {' AND '.join(conditions)}"
        " ORDER BY c.created_at, c.id LIMIT %(limit)s"
    )


# A claim every process using this database sees (`Storage.try_claim`): a
# session-level advisory lock on a 64-bit hash of the claim's name, never
# waited for. A hash collision only makes a claim look taken.
TRY_CLAIM = "SELECT pg_try_advisory_lock(hashtextextended(%(name)s, 0))"
RELEASE_CLAIM = "SELECT pg_advisory_unlock(hashtextextended(%(name)s, 0))"


COUNT_EVENTS = (
    "SELECT count(*) FROM events WHERE %(cid)s::uuid IS NULL OR conversation_id = %(cid)s"
)

# --- search (store.domain.search, docs/search.md) ---

# A message's searchable text is derived from its event, never stored:
# `convo_search_text(data)` (migrations 0006, 0009) is the expression the
# GIN indexes are built on (words always; substring where an operator built
# it), partial on the events that carry content; a search must spell it
# exactly so, to use them. Without the substring index, a substring search
# reads the content events of the conversations it may return.
_CONTENT_EVENTS = "e.type IN ('message_appended', 'message_edited')"
SEARCH_TEXT_MATCH = (
    "to_tsvector('simple'::regconfig, convo_search_text(e.data))"
    " @@ websearch_to_tsquery('simple'::regconfig, %(q)s)"
)
SEARCH_SUBSTRING_MATCH = "convo_search_text(e.data) ILIKE %(pattern)s"

# Each filter, applied to the hits the index found (`a` is the message's
# own appended event: its recorded time).
SEARCH_FILTERS = {
    "conversation": "c.key = %(conversation)s",
    "role": "m.role = %(role)s",
    "agent": "m.agent_id = %(agent)s",
    "kind": "m.kind = %(kind)s",
    "batch": "m.batch = %(batch)s",
    "tool": "EXISTS (SELECT 1 FROM tool_calls AS t WHERE t.conversation_id = m.conversation_id"
    " AND t.tool_name = %(tool)s AND (t.call_id = m.tool_call_id OR t.assistant_seq = m.seq))",
    "from": "a.recorded_at >= %(from)s",
    "to": "a.recorded_at < %(to)s",
    "metadata": "c.metadata @> %(metadata)s",
    "after": "(a.recorded_at, m.conversation_id, m.seq) < (%(at)s, %(after_cid)s, %(after_seq)s)",
}


@cache
def search(*, substring: bool, filters: tuple[str, ...]) -> str:
    """One page of a search: the index finds the events whose text matches;
    each is kept if it holds its message's current text (the appended
    event of an unedited message, the latest edit of an edited one), its
    conversation is the tenant's, and the filters hold; newest first.

    The snippet is made for the page's rows only: ts_headline for text (its
    marks are control characters, removed from the text first), the text
    itself for a substring match (cut around the match by the caller).
    One statement shape per mode and set of filters, each prepared once.
    """
    match = SEARCH_SUBSTRING_MATCH if substring else SEARCH_TEXT_MATCH
    conditions = "".join(f" AND {SEARCH_FILTERS[name]}" for name in filters)
    page = (
        "SELECT m.conversation_id, c.key, m.seq, m.role, m.agent_id, m.kind, m.batch,"
        " a.recorded_at, m.edit_version IS NOT NULL AS edited, e.data"
        " FROM events AS e"
        " JOIN conversations AS c ON c.id = e.conversation_id"
        " JOIN messages AS m"
        " ON m.conversation_id = e.conversation_id AND m.seq = (e.data ->> 'seq')::bigint"
        " JOIN events AS a ON a.conversation_id = m.conversation_id AND a.version = m.event_version"
        f" WHERE {_CONTENT_EVENTS} AND {match}"
        " AND e.version = coalesce(m.edit_version, m.event_version)"
        f" AND c.tenant = %(tenant)s AND c.deleted_at IS NULL{conditions}"
        " ORDER BY a.recorded_at DESC, m.conversation_id DESC, m.seq DESC LIMIT %(limit)s"
    )
    if substring:
        snippet = "convo_search_text(h.data)"
    else:
        snippet = (
            "ts_headline('simple'::regconfig,"
            " translate(convo_search_text(h.data), E'\\x02\\x03', ''),"
            " websearch_to_tsquery('simple'::regconfig, %(q)s), %(headline)s)"
        )
    # Hits name the conversation by the client's id (`key`); the cursor
    # keeps the storage's uuid, which orders the hits.
    return (
        "SELECT h.conversation_id, h.key, h.seq, h.role, h.agent_id, h.kind,"
        f" h.batch, h.recorded_at, h.edited, {snippet} FROM ({page}) AS h"
        " ORDER BY h.recorded_at DESC, h.conversation_id DESC, h.seq DESC"
    )


# --- export and the feed (store.domain.feed, store.repository.export) ---

# Versions of one conversation commit in order (its stream row lock), so a
# keyset by version never skips one: no feed horizon needed here.
CONVERSATION_EVENTS = (
    "SELECT transaction_id, position, version, type, data, recorded_at,"
    " (SELECT key FROM conversations WHERE id = %(cid)s) FROM events"
    " WHERE conversation_id = %(cid)s AND version > %(after)s ORDER BY version LIMIT %(limit)s"
)

# By id, keyset: a conversation changed during an export neither moves nor
# repeats. `updated_at` is filtered, not indexed (see schema.conversations).
CHANGED_CONVERSATIONS = (
    "SELECT id, key, updated_at FROM conversations"
    " WHERE tenant = %(tenant)s AND updated_at >= %(since)s AND deleted_at IS NULL"
    " AND version > 0 AND id > %(after)s ORDER BY id LIMIT %(limit)s"
)
