"""The `tool_calls` view: every call, its tool block and whether it is answered."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import bindparam, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.events import MessageAppended
from store.projections.tables import tool_calls


async def append_many(
    conn: AsyncConnection, conversation_id: uuid.UUID, appended: Sequence[MessageAppended]
) -> None:
    """New calls become pending rows; results complete them. Calls are
    written first: a result may answer a call from the same run."""
    calls = [
        {
            "conversation_id": conversation_id,
            "call_id": call.id,
            "agent_id": event.message.agent_id,
            "tool_name": call.name,
            "arguments": call.arguments,
            "assistant_seq": event.seq,
            "status": "pending",
        }
        for event in appended
        for call in event.message.tool_calls
    ]
    results = [
        {
            "call": event.message.tool_call_id,
            "result_seq": event.seq,
            "is_error": event.message.is_error,
        }
        for event in appended
        if event.message.tool_call_id is not None
    ]
    if calls:
        await conn.execute(tool_calls.insert(), calls)
    if results:
        await conn.execute(
            update(tool_calls)
            .where(
                tool_calls.c.conversation_id == conversation_id,
                tool_calls.c.call_id == bindparam("call"),
            )
            .values(
                result_seq=bindparam("result_seq"),
                status="complete",
                is_error=bindparam("is_error"),
            ),
            results,
        )
