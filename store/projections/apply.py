"""Apply one recorded domain event to every projection it touches.

Called inline, in the append's transaction, and by the rebuild, with the
same events in the same order: that is what makes the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence

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


async def project_all(
    conn: AsyncConnection, pairs: Sequence[tuple[RecordedEvent, DomainEvent]]
) -> None:
    """Apply events in order; each run of appended messages is projected in
    a few statements rather than a few per message."""
    run: list[tuple[RecordedEvent, MessageAppended]] = []
    for recorded, event in pairs:
        if isinstance(event, MessageAppended) and (
            not run or run[0][0].conversation_id == recorded.conversation_id
        ):
            run.append((recorded, event))
            continue
        if run:
            await project_appended(conn, run)
            run = []
        if isinstance(event, MessageAppended):
            run.append((recorded, event))
        else:
            await project(conn, recorded, event)
    if run:
        await project_appended(conn, run)


async def project_appended(
    conn: AsyncConnection, run: Sequence[tuple[RecordedEvent, MessageAppended]]
) -> None:
    cid = run[0][0].conversation_id
    await messages.append_many(
        conn,
        cid,
        [messages.Appended(e, r.version, r.recorded_at) for r, e in run],
    )
    await tool_blocks.append_many(conn, cid, [e for _, e in run])


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
            await project_appended(conn, [(recorded, event)])
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
