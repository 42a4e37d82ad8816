"""An in-memory storage, shipped for users' own tests: no database, the
same repository.

    from store.memory import InMemoryRepository

    async def test_agent_keeps_the_question() -> None:
        repository = InMemoryRepository()
        conversation = await repository.create_conversation()
        await repository.append_messages(
            conversation.id, [{"role": "user", "content": "What is 2 + 2?"}]
        )
        window = await repository.visible_window(conversation.id)
        assert [(m.seq, m.role) for m in window] == [(1, "user")]

`MemoryStorage` implements the storage port (`store.repository.port`) over dicts
that mirror the PostgreSQL tables, one short method per named operation;
everything above the port — the repository's orchestration, the commands'
decisions, the projector — is the same code that runs on PostgreSQL. The
contract suite in tests/contract runs against both.

Writers are serialised per conversation by an `asyncio.Lock`, as the
stream row lock serialises them in PostgreSQL, so concurrent tasks get the
same `ConcurrencyConflict`s. A write applies nothing until `write()`, and
checks everything that could refuse before it changes anything: a refused
write leaves no trace, as a rolled-back transaction.

Where things are: the tables and how changes apply to them in
`store.memory.tables`, a write's session in `store.memory.write_session`,
the reads in `store.memory.reads`; here, the storage itself (writing, the
log, the feed, compaction's queries).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from store.assembler.prefix_cache import PrefixCache
from store.domain.commands import Limits
from store.domain.errors import ConversationExists
from store.domain.feed import ChangedConversation, FeedEvent, FeedPage, scan_limit
from store.domain.feed_vector import FIRST_PARTITION, FeedVector
from store.domain.messages import ROLES
from store.domain.projector import (
    ViewHead,
)
from store.domain.records import FeedPosition, RecordedEvent
from store.memory.reads import MemoryReads
from store.memory.tables import (
    EventRecord,
    StreamRecord,
    Tables,
    Views,
)
from store.memory.write_session import (
    MemoryRebuildSession,
    MemoryRestoreSession,
    MemoryWriteSession,
)
from store.repository import DEFAULT_TENANT, Repository
from store.repository.port import (
    PLAIN_WRITE,
    CandidateCursor,
    CandidateQuery,
    CompactionCandidate,
    StreamRow,
    WriteOptions,
)

__all__ = ["InMemoryRepository", "MemoryStorage"]


# One partition of the feed, as a single PostgreSQL server is.
FEED_PARTITION = FIRST_PARTITION
_ALONE = FeedVector.origin().stamper(FEED_PARTITION)


def _feed_event(
    key: str, event: RecordedEvent | EventRecord, stamp: Callable[[int, int], str] = _ALONE
) -> FeedEvent:
    return FeedEvent(
        checkpoint=stamp(event.transaction_id, event.position),
        conversation_id=key,
        version=event.version,
        type=event.type,
        recorded_at=event.recorded_at,
        data=event.data,
    )


def _put_back(
    tables: Tables,
    cid: uuid.UUID,
    row: StreamRecord | None,
    events: list[EventRecord] | None,
    views: Views | None,
) -> None:
    """A conversation's rows as they were before a restore that failed."""
    tables.streams.pop(cid, None)
    tables.events.pop(cid, None)
    tables.views.pop(cid, None)
    if row is not None:
        tables.streams[cid] = row
    if events is not None:
        tables.events[cid] = events
    if views is not None:
        tables.views[cid] = views


# --- the storage ------------------------------------------------------------------


class MemoryStorage(MemoryReads):
    """`store.repository.port.Storage` over dicts."""

    def __init__(self) -> None:
        self._tables = Tables()
        self.prefix_cache = PrefixCache()
        self._locks: dict[uuid.UUID, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._claims: set[str] = set()  # try_claim's names held in this process
        self._stale_heads = 0

    def report_stale_heads(self, n: int) -> None:
        """Make the next `n` optimistic writes (`writing` with `WriteOptions(optimistic=True)`)
        find the row they were decided on moved on, as PostgreSQL's do when
        another process wrote the conversation between: each writes nothing
        and raises `StaleHead`, so the repository decides again under the
        lock, here as there."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self._stale_heads = n

    def _head(self, cid: uuid.UUID, row: StreamRecord) -> ViewHead:
        index = self._tables.views[cid].role_index if cid in self._tables.views else {}
        return ViewHead(
            next_seq=row.next_seq,
            current_batch=row.current_batch,
            role_counts={role: len(index.get(role, ())) for role in ROLES},
            agent_batches=dict(row.agent_batches),
        )

    @asynccontextmanager
    async def writing(
        self, conversation_id: uuid.UUID, tenant: str, options: WriteOptions = PLAIN_WRITE
    ) -> AsyncIterator[MemoryWriteSession]:
        # Nothing to gain from optimism in memory: the row is always read,
        # but a stale head can be asked for (`report_stale_heads`).
        stale = options.optimistic and options.create is None and self._stale_heads > 0
        if stale:
            self._stale_heads -= 1
        async with self._locks[conversation_id]:
            now = datetime.now(UTC)
            row = self._tables.streams.get(conversation_id)
            if row is None and options.create is not None:
                key = options.create
                row = StreamRecord(tenant=tenant, key=key, created_at=now, updated_at=now)
            stream = (
                None
                if row is None
                else StreamRow(
                    tenant=row.tenant,
                    version=row.version,
                    deleted=row.deleted_at is not None,
                    archived=row.archived_at is not None,
                    head=self._head(conversation_id, row),
                    now=now,
                )
            )
            session = MemoryWriteSession(self._tables, conversation_id, stream, stale=stale)
            if row is not None and conversation_id not in self._tables.streams:
                # Created here: kept only if the write goes through, as the
                # INSERT of the stream row commits only with the transaction.
                self._tables.streams[conversation_id] = row
                try:
                    yield session
                except BaseException:
                    if row.version == 0:
                        del self._tables.streams[conversation_id]
                    raise
                return
            yield session

    # --- the log -------------------------------------------------------------------

    async def read_feed(self, after: FeedPosition, limit: int) -> list[RecordedEvent]:
        # Every write here is finished when it returns: nothing is in flight.
        events = sorted(
            (
                RecordedEvent(
                    position=e.position,
                    conversation_id=cid,
                    version=e.version,
                    type=e.type,
                    data=e.data,
                    recorded_at=e.recorded_at,
                    transaction_id=e.transaction_id,
                )
                for cid, rows in self._tables.events.items()
                for e in rows
            ),
            key=lambda e: (e.transaction_id, e.position),
        )
        start = (after.transaction_id, after.position)
        return [e for e in events if (e.transaction_id, e.position) > start][:limit]

    feed_partitions: tuple[str, ...] = (FEED_PARTITION,)

    async def feed_head(self) -> FeedVector:
        last = await self.read_feed(FeedPosition.start(), limit=10**12)
        return FeedVector.single(last[-1].feed_position if last else FeedPosition.start())

    async def conversation_ids(self) -> list[uuid.UUID]:
        return sorted(self._tables.streams)

    async def compaction_candidates(
        self, tenant: str, query: CandidateQuery
    ) -> list[CompactionCandidate]:
        found: list[CompactionCandidate] = []
        rows = sorted(
            (row.created_at, cid, row)
            for cid, row in self._tables.streams.items()
            if row.tenant == tenant
            and row.version > 0
            and row.deleted_at is None
            and row.archived_at is None
        )
        for created_at, cid, row in rows:
            if query.after is not None and (created_at, cid) <= (
                query.after.created_at,
                query.after.stream,
            ):
                continue
            views = self._tables.views[cid]
            batch = row.batch_of(query.agent_id)
            shown = [
                views.messages[seq]
                for _, seq in views.members.get(batch, ())
                if views.messages[seq].agent_id == query.agent_id
            ]
            messages, tokens = len(shown), sum(m.token_estimate for m in shown)
            if (query.max_messages is not None and messages > query.max_messages) or (
                query.max_tokens is not None and tokens > query.max_tokens
            ):
                found.append(
                    CompactionCandidate(
                        conversation_id=row.key,
                        version=row.version,
                        messages=messages,
                        tokens=tokens,
                        cursor=CandidateCursor(created_at=created_at, stream=cid),
                    )
                )
                if len(found) == query.limit:
                    break
        return found

    @asynccontextmanager
    async def try_claim(self, name: str) -> AsyncIterator[bool]:
        if name in self._claims:
            yield False
            return
        self._claims.add(name)
        try:
            yield True
        finally:
            self._claims.discard(name)

    async def count_events(self, conversation_id: uuid.UUID | None = None) -> int:
        events = self._tables.events
        if conversation_id is not None:
            return len(events.get(conversation_id, ()))
        return sum(len(rows) for rows in events.values())

    # --- export and the tenant feed (store.domain.feed, store.repository.export) ---

    async def tenant_feed(self, tenant: str, after: FeedVector, limit: int) -> FeedPage:
        # As on PostgreSQL: at most `scan_limit` events of the global feed
        # scanned, the page ends at the last one within it.
        scan = scan_limit(limit)
        scanned = await self.read_feed(after.at(FEED_PARTITION), scan)
        streams = self._tables.streams
        stamp = after.stamper(FEED_PARTITION)
        events: list[FeedEvent] = []
        last: FeedPosition | None = None
        for e in scanned:
            if len(events) == limit and streams[e.conversation_id].tenant == tenant:
                break
            last = e.feed_position
            if streams[e.conversation_id].tenant == tenant:
                events.append(_feed_event(streams[e.conversation_id].key, e, stamp))
        following = after.token() if last is None else stamp(last.transaction_id, last.position)
        return FeedPage(
            events=events, next=following, more=len(scanned) >= scan or len(events) >= limit
        )

    async def conversation_events(
        self, conversation_id: uuid.UUID, tenant: str, after_version: int, limit: int
    ) -> list[FeedEvent]:
        key = self._readable(conversation_id, tenant).key
        rows = [e for e in self._tables.events[conversation_id] if e.version > after_version]
        return [_feed_event(key, e) for e in rows[:limit]]

    async def changed_conversations(
        self, tenant: str, since: datetime, after: uuid.UUID | None, limit: int
    ) -> list[ChangedConversation]:
        found = [
            ChangedConversation(id=cid, key=row.key, updated_at=row.updated_at)
            for cid, row in sorted(self._tables.streams.items())
            if row.tenant == tenant
            and row.deleted_at is None
            and row.version > 0
            and row.updated_at >= since
            and (after is None or cid > after)
        ]
        return found[:limit]

    async def wait_for_feed(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        moved = self._tables.feed_moved
        async with moved:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait(), timeout)

    @asynccontextmanager
    async def rebuilding(self, conversation_id: uuid.UUID) -> AsyncIterator[MemoryRebuildSession]:
        async with self._locks[conversation_id]:
            self._tables.views.pop(conversation_id, None)
            stream = self._tables.streams[conversation_id]
            stream.next_seq, stream.current_batch, stream.archived_at = 1, 1, None
            stream.agent_batches = {}
            yield MemoryRebuildSession(self._tables, conversation_id)

    @asynccontextmanager
    async def restoring(
        self, conversation_id: uuid.UUID, tenant: str, key: str
    ) -> AsyncIterator[MemoryRestoreSession]:
        tables, cid = self._tables, conversation_id
        async with self._locks[cid]:
            row = tables.streams.get(cid)
            if row is not None and row.deleted_at is None and row.version > 0:
                raise ConversationExists(key, row.version)
            # As one transaction: what was there comes back if the block fails.
            saved = (row, tables.events.pop(cid, None), tables.views.pop(cid, None))
            requests = tables.requests.pop(cid, None)
            now = datetime.now(UTC)
            tables.streams[cid] = StreamRecord(
                tenant=tenant, key=key, created_at=now, updated_at=now
            )
            try:
                yield MemoryRestoreSession(tables, cid)
            except BaseException:
                _put_back(tables, cid, *saved)
                if requests is not None:
                    tables.requests[cid] = requests
                raise
        async with tables.feed_moved:
            tables.feed_moved.notify_all()

    async def tenant_usage(self, tenant: str) -> tuple[int, int]:
        """(conversations not deleted, bytes of their log as JSON) of `tenant`."""
        streams = [cid for cid, row in self._tables.streams.items() if row.tenant == tenant]
        live = sum(self._tables.streams[cid].deleted_at is None for cid in streams)
        stored = sum(
            len(json.dumps(e.data, separators=(",", ":")))
            for cid in streams
            for e in self._tables.events.get(cid, ())
        )
        return live, stored

    async def ping(self) -> None:
        return None

    async def feed_lag(self) -> float:
        return 0.0  # every write here is finished when it returns

    async def close(self) -> None:
        return None


def InMemoryRepository(  # noqa: N802 - reads as the class it stood for
    *, tenant: str = DEFAULT_TENANT, limits: Limits | None = None
) -> Repository:
    """A `Repository` over a fresh `MemoryStorage`; `for_tenant` shares it."""
    return Repository(MemoryStorage(), tenant=tenant, limits=limits)
