"""The `batches` view and `batch_members`: which messages each batch shows."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.events import BatchStarted
from store.projections.tables import batch_members, batches, conversation_heads


async def first_batch(
    conn: AsyncConnection, conversation_id: uuid.UUID, *, version: int, started_at: datetime
) -> None:
    await conn.execute(
        batches.insert().values(
            conversation_id=conversation_id,
            batch=1,
            boundary=0,
            operation="conversation_started",
            started_at=started_at,
            event_version=version,
        )
    )


async def start(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    event: BatchStarted,
    *,
    version: int,
    started_at: datetime,
) -> None:
    source = event.source_batch
    await conn.execute(
        batches.insert().values(
            conversation_id=conversation_id,
            batch=event.batch,
            boundary=event.boundary,
            summary_seq=event.summary_seq,
            retained=list(event.retained),
            operation=event.operation,
            parameters=event.parameters,
            started_at=started_at,
            event_version=version,
        )
    )
    # The new batch shows, out of the source batch's window, the tail from
    # the boundary on and the retained messages: one index range, O(window).
    await conn.execute(
        batch_members.insert().from_select(
            ["conversation_id", "batch", "sort_key", "seq", "role", "agent_id"],
            select(
                batch_members.c.conversation_id,
                literal(event.batch),
                batch_members.c.sort_key,
                batch_members.c.seq,
                batch_members.c.role,
                batch_members.c.agent_id,
            ).where(
                batch_members.c.conversation_id == conversation_id,
                batch_members.c.batch == source,
                or_(
                    batch_members.c.sort_key >= event.boundary,
                    batch_members.c.seq.in_(event.retained),
                ),
            ),
        )
    )
    await conn.execute(
        update(conversation_heads)
        .where(conversation_heads.c.conversation_id == conversation_id)
        .values(current_batch=event.batch)
    )
