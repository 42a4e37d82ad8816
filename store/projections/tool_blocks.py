"""The `tool_calls` view: every call, its tool block and whether it is answered."""

from __future__ import annotations

import uuid

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.events import MessageAppended
from store.projections.tables import tool_calls


async def append(conn: AsyncConnection, conversation_id: uuid.UUID, event: MessageAppended) -> None:
    message = event.message
    if message.tool_calls:
        await conn.execute(
            tool_calls.insert(),
            [
                {
                    "conversation_id": conversation_id,
                    "call_id": call.id,
                    "agent_id": message.agent_id,
                    "tool_name": call.name,
                    "arguments": call.arguments,
                    "assistant_seq": event.seq,
                    "status": "pending",
                }
                for call in message.tool_calls
            ],
        )
    if message.tool_call_id is not None:
        await conn.execute(
            update(tool_calls)
            .where(
                tool_calls.c.conversation_id == conversation_id,
                tool_calls.c.call_id == message.tool_call_id,
            )
            .values(result_seq=event.seq, status="complete", is_error=message.is_error)
        )
