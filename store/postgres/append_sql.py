"""The one statement that writes an append of messages: events, message
rows, tool calls and their answers, the stream's head, the remembered
request, as data-modifying CTEs (`append_cte`). Plain, it runs under the
stream's lock (`write_session`, through `write_statements`); guarded, it
writes the optimistic appends of any number of conversations at once
(`group_commit`; docs/storage.md, "Appends in one round trip").

Its parts are also the statements of a write that does more than append
(`write_statements`): `INSERT_EVENTS`, `HEAD_UPDATE`, `REQUEST_INSERT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import orjson

# Rows travel as one JSON array per table (`json_to_recordset`): a handful
# of parameters whatever the append holds, and JSON is what Python encodes
# fastest (a dozen typed arrays cost more to adapt than the rest of an append).
# A guarded append's rows also name their conversation (`cid`): it writes
# any number of conversations in one statement (`group_commit`).
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


def rows_json(rows: Sequence[dict[str, Any]]) -> str:
    """Rows for `json_to_recordset`. Decimal sort keys go as strings:
    PostgreSQL reads them into numeric exactly; ids as orjson writes them."""
    return orjson.dumps(rows, default=str).decode()


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


# Optimistic appends (docs/storage.md, "Appends in one round trip") are
# decided on the row as their writer remembers it, and sent as one
# statement in autocommit — the appends to any number of conversations
# together (`group_commit`). Its first part (`lk`) locks the
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
# A lone guarded append (one conversation: what every append of a writer
# that waits for nobody is) names its head by parameters, not JSON rows: the
# row is locked and updated through its primary key. (Joined to the heads'
# JSON rows, whose count the plan cannot know, the generic plan hashed them
# and scanned `conversations` twice: most of the server's time for a
# single-message append without the words index, docs/storage.md, "Where an
# append's time goes".)
_LOCK_HEAD = "SELECT id FROM conversations WHERE id = %(cid)s FOR NO KEY UPDATE SKIP LOCKED"
_NEW_REQUEST_OF_HEAD = (
    " AND NOT EXISTS (SELECT 1 FROM append_requests AS r"
    " WHERE r.conversation_id = %(cid)s AND r.idempotency_key = %(key)s)"
)
_NEW_CLIENT_IDS_OF_HEAD = (
    " AND NOT EXISTS (SELECT 1 FROM messages AS m"
    " WHERE m.conversation_id = %(cid)s AND m.client_message_id = ANY(%(client_ids)s::text[]))"
)
_GUARDED_LONE_HEAD_UPDATE = (
    "UPDATE conversations AS c SET version = %(version)s, next_seq = %(next_seq)s,"
    " current_batch = %(current_batch)s, role_counts = %(role_counts)s::bigint[],"
    " updated_at = now()"
    " WHERE c.id = %(cid)s AND c.id IN (SELECT id FROM lk) AND c.version = %(expected)s"
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
    lone: bool = False,
) -> str:
    """One statement for a whole write of appended messages: events, message
    rows (a message's row is also its membership of the batch it arrives
    in, and its role's index entry), tool calls, the stream's version and
    head, the idempotency request.

    Data-modifying CTEs all run to completion whether or not the outer query
    reads them, in one statement: one Bind/Execute on the wire instead of
    one per table, with one plan cached per shape (at most 64 shapes). They cannot
    see each other's rows, which is why a call answered in the same append
    is inserted answered (`store.domain.projector.AppendMessages`).

    `guarded`: the optimistic appends of any number of conversations
    (above), each row naming its conversation; `request` and `client_ids`
    say whether any of them has an idempotency key or client ids. `lone`:
    a guarded append of one conversation, its head as parameters (the
    keys of `_HEAD_COLUMNS`) rather than JSON rows.
    """
    assert guarded or not client_ids, "client ids are checked under the lock"
    assert guarded or not lone, "a lone append is a guarded one"
    parts = []
    if lone:
        new = (_NEW_REQUEST_OF_HEAD if request else "") + (
            _NEW_CLIENT_IDS_OF_HEAD if client_ids else ""
        )
        parts.append(("lk", _LOCK_HEAD))
        parts.append((_GUARD, f"{_GUARDED_LONE_HEAD_UPDATE}{new} RETURNING c.id, now() AS at"))
    elif guarded:
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
