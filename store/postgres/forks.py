"""Forks (docs/storage.md, "Forks"): what a fork reads of its parent, under
the fork's own write lock and a share lock on the parent, and the one
statement that copies the parent's messages into the fork's log
(`COPY_FORKED`, a projection step: `write_statements`).
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection, AsyncPipeline

from store.domain.errors import InvalidOperation
from store.domain.messages import ROLES
from store.postgres.reads import check_readable, profile_from_rows
from store.postgres.shared_sql import NO_SEQ_ABOVE
from store.repository.port import ForkSource, fork_windows

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


async def read_fork_source(
    conn: AsyncConnection[Any],
    pipeline: AsyncPipeline,
    parent: uuid.UUID,
    tenant: str,
    up_to_seq: int | None,
    agent_id: str | None,
) -> ForkSource:
    """`WriteSession.fork_source`: share-lock the parent and read what
    forking it copies, in one sync."""
    params = {
        "parent": parent,
        "up_to": NO_SEQ_ABOVE if up_to_seq is None else up_to_seq,
        "agent": agent_id,
    }
    cursors = [
        await conn.execute(statement, params)
        for statement in (FORK_PARENT, FORK_COUNTS, FORK_PROFILES, FORK_SLOTS, FORK_WINDOWS)
    ]
    await pipeline.sync()
    row, counts, profiles, slots, windows = [await c.fetchall() for c in cursors]
    _, version, _, next_seq = check_readable(parent, tenant, row[0] if row else None)
    up_to = next_seq - 1 if up_to_seq is None else up_to_seq
    if up_to >= next_seq:
        raise InvalidOperation(
            f"fork up_to_seq {up_to} is past the parent's last message (seq {next_seq - 1})"
        )
    messages, last_seq, pinned, *by_role = counts[0]
    return ForkSource(
        version=version,
        up_to_seq=up_to,
        messages=messages,
        last_seq=last_seq,
        pinned=pinned,
        role_counts=dict(zip(ROLES, by_role, strict=True)),
        profiles=tuple(profile_from_rows(r[0], [r[1:]]) for r in profiles),
        slots=tuple((agent, slot, value) for agent, slot, value in slots),
        windows=fork_windows(windows),
    )
