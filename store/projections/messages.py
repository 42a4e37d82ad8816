"""The `messages` view and the per-role index: one row each per message."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.events import MessageAppended, MessageEdited
from store.messages import Message
from store.projections.tables import (
    batch_members,
    conversation_heads,
    message_role_index,
    messages,
)


def message_body(message: Message) -> dict[str, object]:
    return message.model_dump(mode="json")


@dataclass(frozen=True)
class Appended:
    """One appended message with what its event recorded: where it sits in
    the log (version) and when."""

    event: MessageAppended
    version: int
    recorded_at: datetime


# One backward step of each role's index (ordinals are dense from 1, so the
# highest is the count), for all the roles of a run in one round trip.
LAST_ORDINALS = text(
    "SELECT wanted.role, (SELECT max(ordinal) FROM message_role_index AS i"
    "  WHERE i.conversation_id = :conversation_id AND i.role = wanted.role) AS ordinal"
    " FROM unnest(CAST(:roles AS text[])) AS wanted(role)"
)


async def _last_ordinals(
    conn: AsyncConnection, conversation_id: uuid.UUID, roles: set[str]
) -> dict[str, int]:
    rows = await conn.execute(
        LAST_ORDINALS, {"conversation_id": conversation_id, "roles": sorted(roles)}
    )
    return {r.role: int(r.ordinal or 0) for r in rows}


async def append_many(
    conn: AsyncConnection, conversation_id: uuid.UUID, appended: Sequence[Appended]
) -> None:
    """Project a run of appended messages with a handful of statements,
    however many messages the run holds (agents append in bursts)."""
    ordinals = await _last_ordinals(conn, conversation_id, {a.event.message.role for a in appended})
    message_rows, index_rows, member_rows = [], [], []
    for item in appended:
        event, message = item.event, item.event.message
        ordinals[message.role] += 1
        message_rows.append(
            {
                "conversation_id": conversation_id,
                "seq": event.seq,
                "sort_key": event.sort_key,
                "role": message.role,
                "agent_id": message.agent_id,
                "kind": message.kind.value,
                "batch": event.batch,
                "role_ordinal": ordinals[message.role],
                "body": message_body(message),
                "text": message.text,
                "tool_call_id": message.tool_call_id,
                "tool_names": [c.name for c in message.tool_calls],
                "is_error": message.is_error,
                "client_message_id": message.client_message_id,
                "token_estimate": message.token_estimate or 0,
                "recorded_at": item.recorded_at,
                "edited_at": None,
                "event_version": item.version,
            }
        )
        index_rows.append(
            {
                "conversation_id": conversation_id,
                "role": message.role,
                "ordinal": ordinals[message.role],
                "seq": event.seq,
                "batch": event.batch,
                "agent_id": message.agent_id,
            }
        )
        # Every message joins the batch current when it arrives.
        member_rows.append(
            {
                "conversation_id": conversation_id,
                "batch": event.batch,
                "sort_key": event.sort_key,
                "seq": event.seq,
                "role": message.role,
                "agent_id": message.agent_id,
            }
        )
    await conn.execute(messages.insert(), message_rows)
    await conn.execute(message_role_index.insert(), index_rows)
    await conn.execute(batch_members.insert(), member_rows)
    await conn.execute(
        update(conversation_heads)
        .where(conversation_heads.c.conversation_id == conversation_id)
        .values(
            next_seq=func.greatest(
                conversation_heads.c.next_seq, max(a.event.seq for a in appended) + 1
            )
        )
    )


async def edit(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    event: MessageEdited,
    *,
    recorded_at: datetime,
) -> None:
    row = (
        await conn.execute(
            select(messages.c.body).where(
                messages.c.conversation_id == conversation_id, messages.c.seq == event.seq
            )
        )
    ).one()
    edited = Message.model_validate(
        {**row.body, "content": event.content, "token_estimate": event.token_estimate}
    )
    await conn.execute(
        update(messages)
        .where(messages.c.conversation_id == conversation_id, messages.c.seq == event.seq)
        .values(
            body=message_body(edited),
            text=edited.text,
            token_estimate=edited.token_estimate or 0,
            edited_at=recorded_at,
        )
    )
