"""Every statement the PostgreSQL storage sends, named and kept together.

Hand-written SQL rather than SQLAlchemy Core on the storage's path: these
run on every append and read, psycopg prepares each after a few uses, and
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

# --- the stream row -------------------------------------------------------------

# The stream row, not an event: DO NOTHING here only means "it exists".
CREATE_STREAM = (
    "INSERT INTO conversations (id, tenant) VALUES (%(cid)s, %(tenant)s)"
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
    " next_seq, current_batch, role_counts, now()"
    " FROM conversations WHERE id = %(cid)s FOR UPDATE"
)

CONVERSATION = (
    "SELECT tenant, version, deleted_at IS NOT NULL, current_batch, next_seq,"
    " archived_at IS NOT NULL, created_at, metadata FROM conversations WHERE id = %(cid)s"
)

# --- messages ---------------------------------------------------------------------

# The events' JSON comes back whole (`json` is returned as stored: no
# server-side rendering, which for `jsonb` was half of a 5,000-row read);
# the reader takes the message (or an edit's content) out of it.
MESSAGE_COLUMNS = "m.seq, m.batch, m.role_ordinal, m.token_estimate, e.recorded_at, e.data, ed.data"

MESSAGE_JOINS = (
    " JOIN events AS e ON e.conversation_id = m.conversation_id AND e.version = m.event_version"
    " LEFT JOIN events AS ed"
    " ON ed.conversation_id = m.conversation_id AND ed.version = m.edit_version"
)

_CURRENT_BATCH = "(SELECT current_batch FROM conversations WHERE id = %(cid)s)"

WINDOW = (
    f"SELECT {MESSAGE_COLUMNS} FROM batch_members AS b"
    " JOIN messages AS m ON m.conversation_id = b.conversation_id AND m.seq = b.seq"
    f"{MESSAGE_JOINS}"
    " WHERE b.conversation_id = %(cid)s AND b.batch = coalesce(%(batch)s, "
    f"{_CURRENT_BATCH})"
    " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
    " ORDER BY b.sort_key"
)

# What a batch operation decides on: the window's entries, bodies included
# (a filter reads the text).
WINDOW_ENTRIES = (
    "SELECT b.seq, b.sort_key, m.role, m.agent_id, m.tool_call_id,"
    " e.data, ed.data FROM batch_members AS b"
    " JOIN messages AS m ON m.conversation_id = b.conversation_id AND m.seq = b.seq"
    f"{MESSAGE_JOINS}"
    " WHERE b.conversation_id = %(cid)s AND b.batch = %(batch)s ORDER BY b.sort_key"
)

BATCH_EXISTS = "SELECT 1 FROM batches WHERE conversation_id = %(cid)s AND batch = %(batch)s"

RECENT_IN_WINDOW = (
    f"SELECT * FROM (SELECT {MESSAGE_COLUMNS}, b.sort_key FROM batch_members AS b"
    " JOIN messages AS m ON m.conversation_id = b.conversation_id AND m.seq = b.seq"
    f"{MESSAGE_JOINS}"
    f" WHERE b.conversation_id = %(cid)s AND b.batch = {_CURRENT_BATCH} AND m.role = %(role)s"
    " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
    " ORDER BY b.sort_key DESC LIMIT %(n)s) AS recent ORDER BY sort_key"
)

RECENT_IN_HISTORY = (
    f"SELECT * FROM (SELECT {MESSAGE_COLUMNS}, i.ordinal FROM message_role_index AS i"
    " JOIN messages AS m ON m.conversation_id = i.conversation_id AND m.seq = i.seq"
    f"{MESSAGE_JOINS}"
    " WHERE i.conversation_id = %(cid)s AND i.role = %(role)s"
    " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
    " ORDER BY i.ordinal DESC LIMIT %(n)s) AS recent ORDER BY ordinal"
)

ROLE_RANGE = (
    f"SELECT {MESSAGE_COLUMNS} FROM message_role_index AS i"
    " JOIN messages AS m ON m.conversation_id = i.conversation_id AND m.seq = i.seq"
    f"{MESSAGE_JOINS}"
    " WHERE i.conversation_id = %(cid)s AND i.role = %(role)s"
    " AND i.ordinal BETWEEN %(first)s AND %(last)s ORDER BY i.ordinal"
)

# Each role's count is kept in the stream row (`role_counts`, in ROLES order).
COUNT_IN_HISTORY = "SELECT role_counts FROM conversations WHERE id = %(cid)s"

COUNT_IN_WINDOW = (
    "SELECT m.role, count(*) FROM batch_members AS b"
    " JOIN messages AS m ON m.conversation_id = b.conversation_id AND m.seq = b.seq"
    f" WHERE b.conversation_id = %(cid)s AND b.batch = {_CURRENT_BATCH} GROUP BY m.role"
)

HISTORY_ASC = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{MESSAGE_JOINS}"
    " WHERE m.conversation_id = %(cid)s AND m.seq > %(after)s AND m.seq < %(before)s"
    " ORDER BY m.seq LIMIT %(limit)s"
)

HISTORY_DESC = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{MESSAGE_JOINS}"
    " WHERE m.conversation_id = %(cid)s AND m.seq > %(after)s AND m.seq < %(before)s"
    " ORDER BY m.seq DESC LIMIT %(limit)s"
)

BATCH_MESSAGES = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{MESSAGE_JOINS}"
    " WHERE m.conversation_id = %(cid)s AND m.batch = %(batch)s ORDER BY m.seq"
)

MESSAGE_BY_SEQ = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{MESSAGE_JOINS}"
    " WHERE m.conversation_id = %(cid)s AND m.seq = %(seq)s"
)

MESSAGES_BY_CLIENT_ID = (
    f"SELECT {MESSAGE_COLUMNS}, m.client_message_id FROM messages AS m{MESSAGE_JOINS}"
    " WHERE m.conversation_id = %(cid)s AND m.client_message_id = ANY(%(ids)s)"
)

MESSAGES_WRITTEN_BY = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{MESSAGE_JOINS}"
    " WHERE m.conversation_id = %(cid)s"
    " AND m.event_version BETWEEN %(first)s AND %(last)s ORDER BY m.seq"
)

# The assembler's input: the agent's window, bodies only.
ASSEMBLY_WINDOW = (
    "SELECT e.data, ed.data FROM batch_members AS b"
    " JOIN messages AS m ON m.conversation_id = b.conversation_id AND m.seq = b.seq"
    f"{MESSAGE_JOINS}"
    f" WHERE b.conversation_id = %(cid)s AND b.batch = {_CURRENT_BATCH}"
    " AND m.agent_id = %(agent)s ORDER BY b.sort_key"
)

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
    "SELECT batch, boundary, summary_seq, retained, operation, parameters, started_at"
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
_EVENT_ROWS = "json_to_recordset(%(events)s::json) AS x(version bigint, type text, data json)"
_MESSAGE_ROWS = (
    "json_to_recordset(%(messages)s::json) AS x(seq bigint, event_version bigint,"
    " role_ordinal bigint, batch int, token_estimate int, is_error bool, sort_key numeric,"
    " role text, agent_id text, kind text, tool_call_id text, client_message_id text)"
)
_CALL_ROWS = (
    "json_to_recordset(%(calls)s::json) AS x(call_id text, agent_id text, tool_name text,"
    " assistant_seq bigint, result_seq bigint, is_error bool)"
)
_ANSWER_ROWS = (
    "json_to_recordset(%(answers)s::json) AS x(call_id text, result_seq bigint, is_error bool)"
)

INSERT_EVENTS = (
    "INSERT INTO events (conversation_id, version, type, data)"
    f" SELECT %(cid)s, x.version, x.type, x.data FROM {_EVENT_ROWS}"
)

INSERT_MESSAGES = (
    "INSERT INTO messages (conversation_id, seq, event_version, role_ordinal, batch,"
    " token_estimate, is_error, sort_key, role, agent_id, kind, tool_call_id, client_message_id)"
    " SELECT %(cid)s, x.seq, x.event_version, x.role_ordinal, x.batch, x.token_estimate,"
    " x.is_error, x.sort_key, x.role, x.agent_id, x.kind, x.tool_call_id, x.client_message_id"
    f" FROM {_MESSAGE_ROWS}"
)

INSERT_ROLE_INDEX = (
    "INSERT INTO message_role_index (conversation_id, role, ordinal, seq)"
    f" SELECT %(cid)s, x.role, x.role_ordinal, x.seq FROM {_MESSAGE_ROWS}"
)

# Every message joins the batch current when it arrives.
INSERT_MEMBERS = (
    "INSERT INTO batch_members (conversation_id, batch, sort_key, seq)"
    f" SELECT %(cid)s, x.batch, x.sort_key, x.seq FROM {_MESSAGE_ROWS}"
)

INSERT_CALLS = (
    "INSERT INTO tool_calls (conversation_id, call_id, agent_id, tool_name, assistant_seq,"
    " result_seq, is_error, status)"
    " SELECT %(cid)s, x.call_id, x.agent_id, x.tool_name, x.assistant_seq, x.result_seq,"
    " coalesce(x.is_error, false),"
    " CASE WHEN x.result_seq IS NULL THEN 'pending' ELSE 'complete' END"
    f" FROM {_CALL_ROWS}"
)

ANSWER_CALLS = (
    "UPDATE tool_calls AS t SET result_seq = x.result_seq, status = 'complete',"
    f" is_error = x.is_error FROM {_ANSWER_ROWS}"
    " WHERE t.conversation_id = %(cid)s AND t.call_id = x.call_id"
)

HEAD_UPDATE = (
    "UPDATE conversations SET version = %(version)s, next_seq = %(next_seq)s,"
    " current_batch = %(current_batch)s, role_counts = %(role_counts)s::bigint[],"
    " updated_at = now()"
    " WHERE id = %(cid)s"
)

REQUEST_INSERT = (
    "INSERT INTO append_requests"
    " (conversation_id, idempotency_key, request_hash, first_version, last_version)"
    " VALUES (%(cid)s, %(key)s, %(hash)s, %(first)s, %(last)s)"
)


@cache
def append_cte(*, with_messages: bool, calls: bool, answers: bool, request: bool) -> str:
    """One statement for a whole write of appended messages: events, message
    rows, role index, batch membership, tool calls, the stream's version and
    head, the idempotency request.

    Data-modifying CTEs all run to completion whether or not the outer query
    reads them, in one statement: one Bind/Execute on the wire instead of
    seven, with one plan cached per shape (at most 16 shapes). They cannot
    see each other's rows, which is why a call answered in the same append
    is inserted answered (`store.projections.projector.AppendMessages`).
    """
    parts = [("ev", INSERT_EVENTS)]
    if with_messages:
        # The message rows are decoded from JSON once, for the three tables.
        rows = f"SELECT * FROM {_MESSAGE_ROWS}"
        parts += [
            ("x", rows),
            ("ms", INSERT_MESSAGES.replace(f"FROM {_MESSAGE_ROWS}", "FROM x")),
            ("ri", INSERT_ROLE_INDEX.replace(f"FROM {_MESSAGE_ROWS}", "FROM x")),
            ("bm", INSERT_MEMBERS.replace(f"FROM {_MESSAGE_ROWS}", "FROM x")),
        ]
    if calls:
        parts.append(("tc", INSERT_CALLS))
    if answers:
        parts.append(("ta", ANSWER_CALLS))
    if request:
        parts.append(("rq", REQUEST_INSERT))
    ctes = ", ".join(f"{name} AS ({statement})" for name, statement in parts)
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
    " parameters, started_at, event_version) VALUES (%(cid)s, %(batch)s, %(boundary)s,"
    " %(summary)s, %(retained)s, %(operation)s, %(parameters)s, %(at)s, %(version)s)"
)

# The new batch shows, out of the source batch's window, the tail from the
# boundary on and the retained messages: one index range, O(window).
COPY_MEMBERS = (
    "INSERT INTO batch_members (conversation_id, batch, sort_key, seq)"
    " SELECT conversation_id, %(batch)s, sort_key, seq FROM batch_members"
    " WHERE conversation_id = %(cid)s AND batch = %(source)s"
    " AND (sort_key >= %(boundary)s OR seq = ANY(%(retained)s))"
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

# Every projection table, for a purge or a rebuild (the role index's
# partitions go with their parent).
VIEW_TABLES = (
    "messages",
    "message_role_index",
    "batches",
    "batch_members",
    "tool_calls",
    "agent_profiles",
    "context_slots",
)
DELETE_VIEWS = tuple(f"DELETE FROM {t} WHERE conversation_id = %(cid)s" for t in VIEW_TABLES)
RESET_HEAD = (
    "UPDATE conversations SET next_seq = 1, current_batch = 1, role_counts = '{0,0,0,0}',"
    " archived_at = NULL WHERE id = %(cid)s"
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

COUNT_EVENTS = (
    "SELECT count(*) FROM events WHERE %(cid)s::uuid IS NULL OR conversation_id = %(cid)s"
)
