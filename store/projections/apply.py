"""Apply one recorded domain event to every projection it touches.

Called inline, in the append's transaction, and by the rebuild, with the
same events in the same order: that is what makes the two equal.
"""

from __future__ import annotations

from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.events import (
    AgentConfigured,
    BatchStarted,
    ContextSlotUpdated,
    ConversationArchived,
    ConversationDeleted,
    ConversationStarted,
    DomainEvent,
    MessageAppended,
    MessageEdited,
)
from store.projections import batches, context, messages, tool_blocks
from store.projections.tables import PROJECTION_TABLES, conversation_heads
from store.records import RecordedEvent


async def project(conn: AsyncConnection, recorded: RecordedEvent, event: DomainEvent) -> None:
    cid = recorded.conversation_id
    version = recorded.version
    match event:
        case ConversationStarted():
            await conn.execute(
                conversation_heads.insert().values(
                    conversation_id=cid,
                    tenant=event.tenant,
                    next_seq=1,
                    current_batch=1,
                    started_at=recorded.recorded_at,
                    metadata=event.metadata,
                )
            )
            await batches.first_batch(conn, cid, version=version, started_at=recorded.recorded_at)
        case MessageAppended():
            await messages.append(
                conn, cid, event, version=version, recorded_at=recorded.recorded_at
            )
            await tool_blocks.append(conn, cid, event)
        case MessageEdited():
            await messages.edit(conn, cid, event, recorded_at=recorded.recorded_at)
        case BatchStarted():
            await batches.start(conn, cid, event, version=version, started_at=recorded.recorded_at)
        case AgentConfigured():
            await context.configure(conn, cid, event, version=version)
        case ContextSlotUpdated():
            await context.update_slot(conn, cid, event, version=version)
        case ConversationArchived():
            await conn.execute(
                update(conversation_heads)
                .where(conversation_heads.c.conversation_id == cid)
                .values(archived=True)
            )
        case ConversationDeleted():
            for table in PROJECTION_TABLES:
                await conn.execute(delete(table).where(table.c.conversation_id == cid))
