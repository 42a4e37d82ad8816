"""A write as the statements that record it, under the stream's lock.

Appended messages (the hot path) are one statement, `append_sql.append_cte`.
Anything else is the events, then each projection step's statements
(`step_statements`: the views a batch operation, an edit, a pin, a fork's
copy, a purge... change), then the stream's head. A rebuild (`rebuild`)
replays the same steps.
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.types.json import Jsonb

from store.domain.messages import ROLES
from store.domain.projector import (
    AppendMessages,
    Archive,
    ConfigureAgent,
    CopyForked,
    EditMessage,
    PinMessage,
    PurgeViews,
    SetMetadata,
    SetSlot,
    StartBatch,
    StartViews,
    Step,
    ViewHead,
)
from store.postgres.append_sql import (
    ANSWER_CALLS,
    HEAD_UPDATE,
    INSERT_CALLS,
    INSERT_EVENTS,
    INSERT_MESSAGES,
    REQUEST_INSERT,
    append_cte,
    rows_json,
)
from store.postgres.forks import COPY_FORKED
from store.postgres.pooled import json_text
from store.postgres.shared_sql import MEMBER_SOURCES, PROBE_EVENTS
from store.repository.port import Write

# A statement and its parameters.
Statement = tuple[str, dict[str, Any]]

# An append never moves an agent's window, so `append_sql.HEAD_UPDATE` (the
# hot path) leaves `agent_batches` alone; a batch operation, a fork or a
# rebuild sets it.
SET_AGENT_BATCHES = "UPDATE conversations SET agent_batches = %(agent_batches)s WHERE id = %(cid)s"

# --- one projection step each -----------------------------------------------------------

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
# Each with what a payload build reads of its message (`tables.batch_carried`;
# a member inserted without them, by a release before migration 0021, gets
# them from its message by the migration's trigger), its event's body
# included (migration 0022).
COPY_MEMBERS = (
    "INSERT INTO batch_carried (conversation_id, batch, sort_key, seq, agent_id,"
    " event_version, edit_version, body, body_position) "
) + (
    " UNION ALL ".join(
        f"SELECT b.conversation_id, %(batch)s, b.sort_key, b.seq, m.agent_id, m.event_version,"
        f" m.edit_version, e.data, e.position FROM {source}{PROBE_EVENTS}"
        " WHERE b.conversation_id = %(cid)s AND b.batch = %(source)s"
        " AND (b.sort_key >= %(boundary)s OR b.seq = ANY(%(retained)s))"
        " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
        for source in MEMBER_SOURCES
    )
)
# ... and the bodies of the members of the batch the window leaves are
# dropped: no payload build reads that batch for this window any more, so
# the copies stay bounded by the windows, not the history. (The batch stays
# readable: a member without its copy is read from its event.)
DROP_LEFT_BODIES = (
    "UPDATE batch_carried SET body = NULL, body_position = NULL"
    " WHERE conversation_id = %(cid)s AND batch = %(left)s AND body IS NOT NULL"
    " AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)"
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

# --- a write -------------------------------------------------------------------------------


def events_params(write: Write) -> dict[str, Any]:
    return {
        "events": rows_json(
            [{"version": e.version, "type": e.type, "data": e.data} for e in write.events]
        )
    }


def append_params(step: AppendMessages) -> dict[str, Any]:
    return {
        "messages": rows_json([r.__dict__ for r in step.messages]),
        "calls": rows_json([c.__dict__ for c in step.calls]),
        "answers": rows_json([a.__dict__ for a in step.answered]),
    }


def head_params(cid: uuid.UUID, version: int, head: ViewHead) -> dict[str, Any]:
    counts = head.role_counts
    return {
        "cid": cid,
        "version": version,
        "next_seq": head.next_seq,
        "current_batch": head.current_batch,
        "role_counts": "{" + ",".join(str(counts[role]) for role in ROLES) + "}",
    }


def agent_batches(cid: uuid.UUID, head: ViewHead) -> Statement:
    return SET_AGENT_BATCHES, {"cid": cid, "agent_batches": Jsonb(head.agent_batches)}


def step_statements(cid: uuid.UUID, step: Step) -> list[Statement]:
    """The statements that write one projection step."""
    match step:
        case StartViews():
            return [
                (START_VIEWS, {"cid": cid, "at": step.started_at, "version": step.version}),
                (SET_METADATA, {"cid": cid, "metadata": Jsonb(step.metadata, dumps=json_text)}),
            ]
        case AppendMessages():
            params = {"cid": cid, **append_params(step)}
            statements = [INSERT_MESSAGES]
            if step.calls:
                statements.append(INSERT_CALLS)
            if step.answered:
                statements.append(ANSWER_CALLS)
            return [(s, params) for s in statements]
        case EditMessage():
            params = {
                "cid": cid,
                "seq": step.seq,
                "version": step.edit_version,
                "tokens": step.token_estimate,
            }
            return [(EDIT_MESSAGE, params)]
        case StartBatch():
            batch = {
                "cid": cid,
                "agent": step.agent_id,
                "batch": step.batch,
                "boundary": step.boundary,
                "summary": step.summary_seq,
                "retained": Jsonb(list(step.retained)),
                "operation": step.operation,
                "parameters": Jsonb(step.parameters, dumps=json_text),
                "at": step.started_at,
                "version": step.version,
            }
            copy = {
                "cid": cid,
                "agent": step.agent_id,
                "batch": step.batch,
                "source": step.source_batch,
                "boundary": step.boundary,
                "retained": list(step.retained),
            }
            left = {"cid": cid, "agent": step.agent_id, "left": step.left_batch}
            return [(INSERT_BATCH, batch), (COPY_MEMBERS, copy), (DROP_LEFT_BODIES, left)]
        case ConfigureAgent():
            params = {
                "cid": cid,
                "agent": step.agent_id,
                "sub": step.is_sub_agent,
                "prompt": step.system_prompt,
                "role": step.role_definition,
                "version": step.version,
            }
            if step.role_definition_only:
                return [(UPSERT_ROLE_DEFINITION, params)]
            return [(UPSERT_PROFILE, params)]
        case SetSlot():
            key = {"cid": cid, "agent": step.agent_id, "slot": step.slot}
            if step.value is None:
                return [(DELETE_SLOT, key)]
            value = Jsonb(step.value, dumps=json_text)
            return [(UPSERT_SLOT, {**key, "value": value, "version": step.version})]
        case Archive():
            return [(ARCHIVE, {"cid": cid, "at": step.archived_at})]
        case SetMetadata():
            return [(SET_METADATA, {"cid": cid, "metadata": Jsonb(step.metadata, dumps=json_text)})]
        case PurgeViews():
            return [(statement, {"cid": cid}) for statement in DELETE_VIEWS]
        case PinMessage():
            return [(PIN_MESSAGE, {"cid": cid, "seq": step.seq, "pinned": step.pinned})]
        case CopyForked():
            params = {
                "cid": cid,
                "parent": step.parent,
                "up_to": step.up_to_seq,
                "agent": step.agent_id,
                "first": step.first_version,
                "count": step.messages,
            }
            return [(COPY_FORKED, params)]


def request_row(write: Write) -> dict[str, Any]:
    """The remembered request's columns (`append_REQUEST_INSERT`), if any."""
    if write.request is None:
        return {}
    key, stored = write.request
    return {
        "key": key,
        "hash": stored.request_hash,
        "first": stored.first_version,
        "last": stored.last_version,
    }


def new_version(write: Write) -> int:
    """The stream's version once `write` is recorded."""
    return write.version or write.events[-1].version


def only_messages(write: Write) -> AppendMessages | None:
    """The append step of a write of appended messages (None: no message)."""
    steps = write.changes.steps
    assert len(steps) <= 1, "one append step at most"
    step = steps[0] if steps else None
    assert step is None or isinstance(step, AppendMessages)
    return step


def write_statements(cid: uuid.UUID, write: Write) -> list[Statement]:
    """A write under the stream's lock as statements: one, for appended
    messages (the hot path)."""
    changes = write.changes
    head = head_params(cid, new_version(write), changes.head)
    request = request_row(write)
    steps = changes.steps
    if all(isinstance(s, AppendMessages) for s in steps) and len(steps) <= 1:
        appended = only_messages(write)
        statement = append_cte(
            with_messages=appended is not None,
            calls=bool(appended and appended.calls),
            answers=bool(appended and appended.answered),
            request=bool(request),
        )
        params = {**head, **events_params(write), **request}
        if appended is not None:
            params.update(append_params(appended))
        return [(statement, params)]
    statements = [(INSERT_EVENTS, {"cid": cid, **events_params(write)})]
    for step in steps:
        statements += step_statements(cid, step)
    statements.append((HEAD_UPDATE, head))
    statements.append(agent_batches(cid, changes.head))
    if request:
        statements.append((REQUEST_INSERT, {"cid": cid, **request}))
    return statements
