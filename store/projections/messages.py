"""The `messages` view and the per-role index: one row each per message."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import func, select, update
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


async def append(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    event: MessageAppended,
    *,
    version: int,
    recorded_at: datetime,
) -> None:
    message = event.message
    ordinal = (
        await conn.execute(
            select(func.coalesce(func.max(message_role_index.c.ordinal), 0) + 1).where(
                message_role_index.c.conversation_id == conversation_id,
                message_role_index.c.role == message.role,
            )
        )
    ).scalar_one()
    await conn.execute(
        messages.insert().values(
            conversation_id=conversation_id,
            seq=event.seq,
            sort_key=event.sort_key,
            role=message.role,
            agent_id=message.agent_id,
            kind=message.kind.value,
            batch=event.batch,
            role_ordinal=ordinal,
            body=message_body(message),
            text=message.text,
            tool_call_id=message.tool_call_id,
            tool_names=[c.name for c in message.tool_calls],
            is_error=message.is_error,
            client_message_id=message.client_message_id,
            token_estimate=message.token_estimate or 0,
            recorded_at=recorded_at,
            event_version=version,
        )
    )
    await conn.execute(
        message_role_index.insert().values(
            conversation_id=conversation_id,
            role=message.role,
            ordinal=ordinal,
            seq=event.seq,
            batch=event.batch,
            agent_id=message.agent_id,
        )
    )
    # Every message joins the batch current when it arrives.
    await conn.execute(
        batch_members.insert().values(
            conversation_id=conversation_id,
            batch=event.batch,
            sort_key=event.sort_key,
            seq=event.seq,
            role=message.role,
            agent_id=message.agent_id,
        )
    )
    await conn.execute(
        update(conversation_heads)
        .where(conversation_heads.c.conversation_id == conversation_id)
        .values(next_seq=func.greatest(conversation_heads.c.next_seq, event.seq + 1))
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
