"""Rebuild projections from the event log: one conversation, or all.

Each conversation is rebuilt in its own transaction, holding its stream
row lock (so no append interleaves): its view rows are deleted and its
events replayed, in chunks, through the same projector the append path
uses (`store.domain.projector`). That is why a rebuild equals what
inline maintenance built — the property test in
tests/integration/test_rebuild_property.py checks it row for row. Other
conversations stay readable and writable meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from store.domain.projector import ViewHead, project
from store.repository.port import RebuildSession, Storage

REPLAY_CHUNK = 1000

Progress = Callable[[int], None]  # called with the number of events just replayed


@dataclass(frozen=True, kw_only=True)
class RebuildReport:
    conversations: int
    events: int


async def rebuild_conversation(
    storage: Storage, conversation_id: uuid.UUID, progress: Progress | None = None
) -> int:
    """Rebuild one conversation's views; the number of events replayed."""
    async with storage.rebuilding(conversation_id) as session:
        return await replay(session, progress)


async def replay(session: RebuildSession, progress: Progress | None = None) -> int:
    """Replay the session's conversation's events into its emptied views, a
    chunk at a time (a rebuild's, and a restore's: store.repository.retention);
    the number of events replayed."""
    replayed, after, head = 0, 0, ViewHead()
    while True:
        chunk = await session.events(after, REPLAY_CHUNK)
        if not chunk:
            return replayed
        changes = project(head, chunk)
        await session.apply(changes)
        head = changes.head
        replayed += len(chunk)
        after = chunk[-1].version
        if progress is not None:
            progress(len(chunk))


async def rebuild(
    storage: Storage,
    conversation_id: uuid.UUID | None = None,
    *,
    progress: Progress | None = None,
) -> RebuildReport:
    """Rebuild the projections of one conversation, or of every one."""
    ids = [conversation_id] if conversation_id is not None else await storage.conversation_ids()
    total = 0
    for cid in ids:
        total += await rebuild_conversation(storage, cid, progress)
    return RebuildReport(conversations=len(ids), events=total)
