"""How a window is read: an agent's, every agent's, a page of one, the last
N of a role in it, its role counts (docs/storage.md, "A window per agent",
"Whole-window reads"). `reads` runs these statements.

A read of a window is branches (`Branch`), one per source of the batch's
members (`shared_sql.MEMBER_SOURCES`) and per way of finding the batch,
each under a gate evaluated once, so that only the branches that apply
start (`_gated`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from store.postgres.shared_sql import (
    ARRIVED,
    CARRIED,
    CARRIED_BODIES,
    CARRIED_BODY,
    CARRIED_BODY_POSITION,
    CARRIED_EDIT,
    CONVERSATION_COLUMNS,
    EDIT,
    JOINED_EVENTS,
    MESSAGE_COLUMNS,
    PROBE_EVENTS,
    READABLE,
    limit_of,
)

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
    arrived = (PROBE_EVENTS if by_key else JOINED_EVENTS) if bodies else ""
    carried = PROBE_EVENTS if bodies else ""
    return [
        (_joined(ARRIVED, on, arrived), conditions, gate),
        (_joined(CARRIED, on, carried), conditions, gate),
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
# One statement for both read the agent map per row and misled the planner:
# it expected a handful of rows, and probed `events` once per message of a
# whole window (docs/storage.md, "Whole-window reads").
_NO_OWN_WINDOWS = "agent_batches = '{}'::jsonb"
# The gate of that branch, and its batch as an index condition.
_NO_OWN = f"(SELECT {_NO_OWN_WINDOWS} FROM conversations WHERE id = %(cid)s)"
_IN_CURRENT_BATCH = "b.batch = (SELECT current_batch FROM conversations WHERE id = %(cid)s)"
_EVERY_WINDOW_COLUMNS = (
    "m.seq, m.batch, m.role_ordinal, m.token_estimate, e.recorded_at, e.data AS body,"
    f" {EDIT} AS edit, m.pinned, b.sort_key AS window_key"
)
# What a window read returns: `MESSAGE_COLUMNS`, by the names above (and, last,
# the window key: see `_one_of`).
_WINDOW_OUTPUT = "seq, batch, role_ordinal, token_estimate, recorded_at, body, edit, pinned"


def _gated(branches: list[Branch], columns: str | list[str], tail: str = "") -> str:
    """Branches of which only those whose gate holds run, as one UNION ALL:
    each `SELECT columns FROM ... WHERE ...tail` under its gate, a test
    evaluated once before the branch starts (a one-time filter above it),
    so a branch whose gate is false never starts. `columns`: the same for
    every branch, or each branch's own. `tail`: the branch's ORDER BY/LIMIT,
    or OFFSET 0 to keep the planner from flattening it into the gate's
    level."""
    each = [columns] * len(branches) if isinstance(columns, str) else columns
    return " UNION ALL ".join(
        f"(SELECT * FROM (SELECT {cols} FROM {from_} WHERE {' AND '.join(conditions)}{tail})"
        f" AS branch WHERE {gate})"
        for (from_, conditions, gate), cols in zip(branches, each, strict=True)
    )


def _one_of(
    branches: list[Branch],
    output: str,
    *,
    page: bool,
    columns: str | list[str] = _EVERY_WINDOW_COLUMNS,
) -> str:
    """A window read as gated branches (`_gated`).

    `page`: from past `%(after)s`, at most `%(limit)s`, in window order,
    `window_key` last.
    Else the whole window, in no order, its key in the last two columns:
    the reader sorts it (`reads.in_window_order`). Sorted here, the bodies'
    wide rows were copied into a sort and the server sent nothing until the
    last was read, which cost more than loading the keys and sorting rows
    that mostly arrive in order (one pass of Python's sort). The key is sent
    as the message's seq (an integer), and its sort key only where the two
    differ (an inserted message's, between two seqs): a numeric per row
    became a Decimal per row (docs/storage.md, "Whole-window reads")."""
    after, limit = [], ""
    if page:
        # Each branch stops at the page's end too: an index range, not the window.
        after = ["b.sort_key > %(after)s"]
        output, limit = f"{output}, window_key", " ORDER BY b.sort_key LIMIT %(limit)s"
    union = _gated(
        [(from_, [*conditions, *after], gate) for from_, conditions, gate in branches],
        columns,
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
# compacted window in a long history was a hash join over the whole history
# (docs/storage.md, "A window per agent").
def _first_batch(gate: str) -> Branch:
    conditions = ["b.conversation_id = %(cid)s", "b.batch = 1", "m.agent_id = %(agent)s"]
    return (f"{ARRIVED}{JOINED_EVENTS}", conditions, gate)


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


# A whole window is read for the batch the agent's window is expected in
# (`%(batch)s`, where this storage last found it: `known_batches`), in
# the same round trip as the conversation's row: the statement for that
# batch alone, rather than the gated branches a page uses, which planned
# every branch on every read (docs/storage.md, "Whole-window reads"). Every
# branch runs only while the window is still in that batch, as the
# statement's own snapshot has it; when it is not, the one row that comes
# back instead names the batch it is in, and the reader reads again there.
# A window is never read from a batch it has left.
_READABLE_BATCH_OF_AGENT = (
    "(SELECT coalesce((agent_batches ->> %(agent)s::text)::int, current_batch)"
    " FROM conversations WHERE id = %(cid)s AND tenant = %(tenant)s AND version <> 0"
    " AND deleted_at IS NULL)"
)
_STILL_IN_BATCH = f"{_READABLE_BATCH_OF_AGENT} = %(batch)s"


def agent_window_in(output: str, *, first: bool) -> str:
    """Agent `%(agent)s`'s whole window, in no order (`_one_of`), read as in
    batch 1 (`first`, with `%(batch)s` 1) or batch `%(batch)s`, if the
    agent's window is in that batch and tenant `%(tenant)s` may read the
    conversation. Else a single row of nulls but its last column: the batch
    the window is in, null if the conversation may not be read
    (`moved_to`)."""
    branches = (
        [_first_batch(_STILL_IN_BATCH)] if first else _later_batch("%(batch)s", _STILL_IN_BATCH)
    )
    return _or_where_it_is(_one_of(branches, output, page=False), output)


def _or_where_it_is(window: str, output: str) -> str:
    """`window`, or the row that names the batch the window is in instead
    (`agent_window_in`)."""
    nulls = ", ".join(["NULL"] * (len(output.split(",")) + 1))
    return (
        f"{window} UNION ALL"
        f" SELECT {nulls}, {_READABLE_BATCH_OF_AGENT} WHERE ({_STILL_IN_BATCH}) IS NOT TRUE"
    )


# What the assembler reads of each message: its body, its latest edit, what
# names them (its event's position, its edit's version or 0:
# `codec.StoredWindow`) and its window key (`reads.assembly_input`). A
# carried member's come from its own row (`shared_sql.CARRIED_BODIES`), an
# arrival's from its message's.
_BODIES = "body, edit, body_position, edit_version"
_ARRIVAL_BODY = (
    f"m.seq, e.data AS body, {EDIT} AS edit, e.position AS body_position,"
    " coalesce(m.edit_version, 0) AS edit_version, b.sort_key AS window_key"
)
_CARRIED_BODY = (
    f"b.seq, {CARRIED_BODY} AS body, {CARRIED_EDIT} AS edit,"
    f" {CARRIED_BODY_POSITION} AS body_position,"
    " coalesce(b.edit_version, 0) AS edit_version, b.sort_key AS window_key"
)


def bodies_in(*, first: bool) -> str:
    """`agent_window_in(_BODIES, first=first)`, reading only the bodies:
    a later batch's carried members without their messages' rows."""
    if first:
        branches, columns = [_first_batch(_STILL_IN_BATCH)], [_ARRIVAL_BODY]
    else:
        arrived, _ = _later_batch("%(batch)s", _STILL_IN_BATCH)
        conditions = [
            "b.conversation_id = %(cid)s",
            "b.batch = %(batch)s",
            "b.agent_id = %(agent)s",
        ]
        branches = [arrived, (CARRIED_BODIES, conditions, _STILL_IN_BATCH)]
        columns = [_ARRIVAL_BODY, _CARRIED_BODY]
    return _or_where_it_is(_one_of(branches, _BODIES, page=False, columns=columns), _BODIES)


def moved_to(rows: list[tuple[Any, ...]]) -> tuple[bool, int | None]:
    """Whether `agent_window_in`'s rows say the window was not in the batch
    read, and if so the batch it is in (None: the conversation may not be
    read). A window's rows all have a seq in the last column but one."""
    if len(rows) != 1 or rows[0][-2] is not None:
        return False, None
    batch = rows[0][-1]
    return True, None if batch is None else int(batch)


# CONVERSATION and, last, the batch agent `%(agent)s`'s window is in.
CONVERSATION_OF_AGENT = (
    f"SELECT {CONVERSATION_COLUMNS}, coalesce((agent_batches ->> %(agent)s::text)::int,"
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
    last = f" ORDER BY b.sort_key DESC {limit_of('n')}"
    union = _gated(branches, f"{MESSAGE_COLUMNS}, b.sort_key AS window_key", last)
    return (
        f"SELECT * FROM (SELECT * FROM ({union}) AS recent WHERE {READABLE}"
        f" ORDER BY window_key DESC {limit_of('n')}) AS recent ORDER BY window_key"
    )


# Each role's count in every agent's current window: O(window), the rows of
# the members and `messages` only (no bodies).
COUNT_IN_WINDOW = (
    "SELECT role, count(*) FROM ("
    + _gated(_every_window_branches([], bodies=False), "m.role", " OFFSET 0")
    + ") AS windows GROUP BY role"
)


# The assembler's input: the agent's window, bodies only, each with what
# names its content (`codec.StoredWindow`: its event's position, its edit's
# version) and its key (`bodies_in`).
ASSEMBLY_WINDOW = {first: bodies_in(first=first) for first in (True, False)}
# The rest of the assembler's input, as one more row of the window's
# statement: the agent's profile (its columns as a JSON array, null if it
# has none) and slots (a JSON object) in the first two columns, and in the
# seq's place `HEAD_SEQ`, which no message has (seqs start at 1). One
# statement, not a pipeline of two: the driver's pipeline was a fifth of
# what a small build cost this process (`reads.assembly_input`).
HEAD_SEQ = 0
_AGENT_HEAD = (
    "SELECT (SELECT json_build_array(is_sub_agent, system_prompt, role_definition)"
    " FROM agent_profiles WHERE conversation_id = %(cid)s AND agent_id = %(agent)s),"
    " (SELECT json_object_agg(slot, value) FROM context_slots"
    f" WHERE conversation_id = %(cid)s AND agent_id = %(agent)s), NULL, NULL, {HEAD_SEQ}, NULL"
)
ASSEMBLY = {first: f"{ASSEMBLY_WINDOW[first]} UNION ALL {_AGENT_HEAD}" for first in (True, False)}
# `visible_window(agent_id=...)`: the agent's window as StoredMessage rows.
AGENT_WINDOW = {first: agent_window_in(_WINDOW_OUTPUT, first=first) for first in (True, False)}
