"""The event log under concurrent writers, with real commits.

These are the properties other PostgreSQL event stores have broken: lost or
duplicated events under racing writers of one stream, and tailing readers
that skip an event whose transaction commits late (store/postgres/feed.py).

A write is held open, after its events are inserted and before it commits,
by `HoldingStorage`: the PostgreSQL storage over the same pool, whose write
transactions wait for a test's signal once the repository has written —
so an event's position is drawn early and its commit comes late, through
the real append path.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from store.domain.conversation_keys import stream_id
from store.domain.errors import ConcurrencyConflict
from store.domain.records import FeedPosition, RecordedEvent
from store.postgres import PostgresStorage
from store.postgres.storage import _WriteSession
from store.repository import DEFAULT_TENANT, Appended, Repository
from store.repository.port import PLAIN_WRITE, WriteOptions
from tests.busy import retried_while_busy
from tests.integration.conftest import own_head, read_feed_until, settled_head, texts, user

pytestmark = pytest.mark.slow


class HoldingStorage(PostgresStorage):
    """PostgreSQL storage whose writes, once written, await `hold()` before
    committing. Shares the pool of the storage it was made from."""

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], hold: Callable[[], Awaitable[None]]
    ) -> None:
        super().__init__(pool)
        self.hold = hold

    @asynccontextmanager
    async def writing(
        self, conversation_id: uuid.UUID, tenant: str, options: WriteOptions = PLAIN_WRITE
    ) -> AsyncIterator[_WriteSession]:
        # Never optimistic: the hold goes between the write and its commit,
        # which an optimistic append sends in one round trip.
        async with super().writing(
            conversation_id, tenant, replace(options, optimistic=False)
        ) as session:
            assert isinstance(session, _WriteSession)
            yield session
            if session.written:
                # The write's statements are queued in the pipeline until
                # COMMIT; a read syncs it, so the events are inserted (their
                # positions drawn) before the transaction is held open.
                await session.pending_call_ids()
                await self.hold()


async def test_sixteen_writers_on_one_conversation_lose_and_duplicate_nothing(
    storage: PostgresStorage, repository: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    writers, per_writer = 16, 12
    conflicts: list[tuple[int, ConcurrencyConflict]] = []

    async def writer(w: int) -> list[Appended]:
        appended = []
        for i in range(per_writer):
            while True:
                version = (await repository.get_conversation(cid)).version
                try:
                    appended.append(
                        await retried_while_busy(
                            repository.append_messages,
                            cid,
                            [user(f"{w}:{i}")],
                            expected_version=version,
                        )
                    )
                    break
                except ConcurrencyConflict as conflict:
                    conflicts.append((version, conflict))
        return appended

    # Any exception other than ConcurrencyConflict fails the gather.
    results = await asyncio.gather(*(writer(w) for w in range(writers)))

    total = writers * per_writer
    stream = await read_feed_until(storage, FeedPosition.start(), 1 + total)
    assert [e.version for e in stream] == list(range(1, total + 2))
    assert {e.conversation_id for e in stream} == {stream_id(repository.tenant, cid)}
    numbers = [tuple(map(int, t.split(":"))) for t in texts(stream)[1:] if t is not None]
    written = Counter(numbers)
    assert set(written.values()) == {1}, "an event was duplicated"
    assert len(written) == total, "an event was lost"
    for w in range(writers):
        mine = [i for writer_, i in numbers if writer_ == w]
        assert mine == list(range(per_writer)), "a writer's own events are out of order"
    # Every success says which version it made; the views agree with the log.
    versions = sorted(a.version for r in results for a in r)
    assert versions == list(range(2, total + 2))
    assert sorted(a.messages[0].seq for r in results for a in r) == list(range(1, total + 1))
    conversation = await repository.get_conversation(cid)
    assert (conversation.version, conversation.next_seq) == (total + 1, total + 1)
    window = await repository.visible_window(cid)
    assert [m.seq for m in window] == list(range(1, total + 1))
    assert [m.text for m in window] == [t for t in texts(stream)[1:]]
    by_role = await repository.role_range(cid, "user", 1, total)
    assert [m.role_ordinal for m in by_role] == list(range(1, total + 1))
    assert await repository.count_by_role(cid, scope="history") == {
        "system": 0,
        "user": total,
        "assistant": 0,
        "tool": 0,
    }
    assert conflicts, "16 racing writers should have lost some races"
    for expected, conflict in conflicts:
        # A lost race names what was expected and what won.
        assert conflict.expected == expected
        assert conflict.actual is not None
        assert conflict.actual > expected


async def test_tailing_reader_sees_every_event_exactly_once_in_a_stable_order(
    storage: PostgresStorage,
) -> None:
    start = await own_head(storage)
    writers, per_writer = 8, 15
    expected = writers * (1 + per_writer)  # each conversation's start and its messages
    rng = random.Random(7)
    done = asyncio.Event()
    held = 0

    async def writer(w: int) -> uuid.UUID:
        nonlocal held
        hold_for = 0.0

        async def hold() -> None:
            nonlocal held
            if hold_for:
                held += 1
                await asyncio.sleep(hold_for)

        # Every other writer holds some transactions open after inserting,
        # so positions drawn early commit late: the case that makes
        # sequence-ordered readers skip.
        repository = Repository(HoldingStorage(storage.pool, hold))
        cid = (await repository.create_conversation()).id
        for i in range(per_writer):
            hold_for = rng.uniform(0.01, 0.08) if w % 2 and i % 3 == 0 else 0.0
            await repository.append_messages(cid, [user(f"{w * 1000 + i}")])
        return stream_id(repository.tenant, cid)  # the feed names streams

    seen: list[RecordedEvent] = []

    async def tail() -> None:
        position: FeedPosition = start
        while True:
            batch = await storage.read_feed(position, 7)
            seen.extend(batch)
            if batch:
                position = batch[-1].feed_position
            elif done.is_set() and len(seen) >= expected:
                return
            else:
                await asyncio.sleep(0.005)

    reader = asyncio.create_task(tail())
    cids = await asyncio.gather(*(writer(w) for w in range(writers)))
    done.set()
    await asyncio.wait_for(reader, timeout=60)

    assert held == (writers // 2) * len(range(0, per_writer, 3)), "a chosen write was not held"
    assert len(seen) == expected
    assert len({e.position for e in seen}) == expected, "the tail saw an event twice"
    assert {(e.conversation_id, e.version) for e in seen} == {
        (cid, v) for cid in cids for v in range(1, per_writer + 2)
    }
    numbers = [t for t in texts(seen) if t is not None]
    assert sorted(numbers) == sorted(
        f"{w * 1000 + i}" for w in range(writers) for i in range(per_writer)
    )
    for cid in cids:
        # Each conversation's events reach the tail in version order.
        versions = [e.version for e in seen if e.conversation_id == cid]
        assert versions == list(range(1, per_writer + 2))
    # Every reader, at any later time, sees the same events in the same order.
    again = await storage.read_feed(start, 10_000)
    assert again == seen
    positions = [(e.transaction_id, e.position) for e in seen]
    assert positions == sorted(positions)


async def test_an_event_that_commits_late_is_not_skipped(
    storage: PostgresStorage, repository: Repository
) -> None:
    early = (await repository.create_conversation()).id
    late = (await repository.create_conversation()).id
    mark = await settled_head(storage, 2)
    written, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        written.set()
        await release.wait()

    slow = Repository(HoldingStorage(storage.pool, hold))
    # The slow writer inserts its event first, drawing the lower position…
    slow_append = asyncio.create_task(slow.append_messages(early, [user("1")]))
    try:
        await asyncio.wait_for(written.wait(), timeout=10)
        # …a second writer commits after it.
        await repository.append_messages(late, [user("2")])

        # A reader that went by position alone would now see 2 and move past
        # the position 1 holds: the skip this feed exists to prevent.
        async with storage.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT conversation_id FROM events WHERE position > %s ORDER BY position",
                (mark.position,),
            )
            assert [r[0] for r in await cursor.fetchall()] == [stream_id(DEFAULT_TENANT, late)]
        # While the first is open, the feed must not move past it.
        assert await storage.read_feed(mark, 100) == []
        assert await own_head(storage) == mark
    finally:
        release.set()
        await slow_append

    feed = await read_feed_until(storage, mark, 2)
    assert texts(feed) == ["1", "2"]
    assert [e.conversation_id for e in feed] == [
        stream_id(DEFAULT_TENANT, early),
        stream_id(DEFAULT_TENANT, late),
    ]
    assert feed[0].position < feed[1].position  # drawn first…
    assert feed[0].transaction_id < feed[1].transaction_id  # …and ordered first


async def test_an_open_transaction_holds_the_feed_back_and_loses_nothing(
    storage: PostgresStorage, repository: Repository
) -> None:
    """Any transaction still running — even one that writes no event —
    holds the feed back for every reader until it ends: the price of never
    skipping (store/postgres/feed.py). When it ends, everything appears."""
    cid = (await repository.create_conversation()).id
    mark = await settled_head(storage, 1)

    async with storage.pool.connection() as held:
        await held.execute("BEGIN")
        cursor = await held.execute("SELECT (pg_current_xact_id()::text)::bigint")
        row = await cursor.fetchone()
        assert row is not None
        xid = row[0]
        try:
            for i in range(3):
                await repository.append_messages(cid, [user(f"m{i}")])
            assert await storage.read_feed(mark, 100) == []
            assert await own_head(storage) == mark
        finally:
            await held.execute("COMMIT")

    feed = await read_feed_until(storage, mark, 3)
    assert texts(feed) == ["m0", "m1", "m2"]
    assert all(e.transaction_id > xid for e in feed)
