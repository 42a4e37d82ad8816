"""Rebuild projections from the event log: one conversation, or all.

Each conversation is rebuilt in its own transaction, holding its stream
row lock (so no append interleaves), by deleting its projection rows and
replaying its events through the same `project` function the append path
uses. That is why a rebuild equals what inline maintenance built — the
property test in tests/integration/test_rebuild_property.py checks it row
for row. Other conversations stay readable and writable meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store.events import from_recorded
from store.log import EventLog
from store.projections.apply import project_all
from store.projections.tables import PROJECTION_TABLES
from store.schema import conversations, events

REPLAY_CHUNK = 1000

Progress = Callable[[int], None]  # called with the number of events just replayed


@dataclass(frozen=True, kw_only=True)
class RebuildReport:
    conversations: int
    events: int


async def _rebuild_one(
    conn: AsyncConnection, conversation_id: uuid.UUID, progress: Progress
) -> int:
    await conn.execute(
        select(conversations.c.id).where(conversations.c.id == conversation_id).with_for_update()
    )
    for table in PROJECTION_TABLES:
        await conn.execute(delete(table).where(table.c.conversation_id == conversation_id))
    replayed, from_version = 0, 1
    while True:
        rows = await conn.execute(
            select(events)
            .where(events.c.conversation_id == conversation_id, events.c.version >= from_version)
            .order_by(events.c.version)
            .limit(REPLAY_CHUNK)
        )
        chunk = [EventLog.recorded_from_row(r) for r in rows]
        await project_all(conn, [(r, from_recorded(r)) for r in chunk])
        replayed += len(chunk)
        progress(len(chunk))
        if len(chunk) < REPLAY_CHUNK:
            return replayed
        from_version = chunk[-1].version + 1


async def count_events(engine: AsyncEngine, conversation_id: uuid.UUID | None = None) -> int:
    query = select(func.count()).select_from(events)
    if conversation_id is not None:
        query = query.where(events.c.conversation_id == conversation_id)
    async with engine.connect() as conn:
        return int((await conn.execute(query)).scalar_one())


async def rebuild(
    engine: AsyncEngine,
    conversation_id: uuid.UUID | None = None,
    *,
    progress: Progress | None = None,
) -> RebuildReport:
    """Rebuild the projections of one conversation, or of every one."""
    progress = progress or (lambda _: None)
    if conversation_id is not None:
        ids = [conversation_id]
    else:
        async with engine.connect() as conn:
            ids = list(
                (
                    await conn.execute(select(conversations.c.id).order_by(conversations.c.id))
                ).scalars()
            )
    total = 0
    for cid in ids:
        async with engine.begin() as conn:
            total += await _rebuild_one(conn, cid, progress)
    return RebuildReport(conversations=len(ids), events=total)
