"""The event log under concurrent writers, with real commits.

These are the properties other PostgreSQL event stores have broken: lost or
duplicated events under racing writers of one stream, and tailing readers
that skip an event whose transaction commits late.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from store.errors import ConcurrencyConflict
from store.log import EventLog, lock_stream, write_events
from store.records import FeedPosition, NewEvent, RecordedEvent

pytestmark = pytest.mark.slow


async def test_sixteen_writers_on_one_conversation_lose_and_duplicate_nothing(
    event_log: EventLog,
) -> None:
    cid = uuid.uuid4()
    writers, per_writer = 16, 12
    conflicts: list[tuple[int, ConcurrencyConflict]] = []

    async def writer(w: int) -> None:
        for i in range(per_writer):
            while True:
                version = await event_log.stream_version(cid) or 0
                try:
                    await event_log.append(
                        cid,
                        [NewEvent(type="written", data={"writer": w, "i": i})],
                        expected_version=version,
                    )
                    break
                except ConcurrencyConflict as conflict:
                    conflicts.append((version, conflict))

    # Any exception other than ConcurrencyConflict fails the gather.
    await asyncio.gather(*(writer(w) for w in range(writers)))

    stream = await event_log.read_stream(cid)
    assert [e.version for e in stream] == list(range(1, writers * per_writer + 1))
    written = Counter((e.data["writer"], e.data["i"]) for e in stream)
    assert set(written.values()) == {1}, "an event was duplicated"
    assert len(written) == writers * per_writer, "an event was lost"
    for w in range(writers):
        mine = [e.data["i"] for e in stream if e.data["writer"] == w]
        assert mine == list(range(per_writer)), "a writer's own events are out of order"
    assert conflicts, "16 racing writers should have lost some races"
    for expected, conflict in conflicts:
        # A lost race names what was expected and what won.
        assert conflict.expected == expected
        assert conflict.actual is not None
        assert conflict.actual > expected


async def _slow_append(engine: AsyncEngine, cid: uuid.UUID, n: int, hold: float) -> None:
    """Append one event in a transaction kept open `hold` seconds after the insert."""
    async with engine.begin() as conn:
        version = await lock_stream(conn, cid, create=True)
        assert version is not None
        await write_events(conn, cid, version, [NewEvent(type="written", data={"n": n})])
        await asyncio.sleep(hold)


async def test_tailing_reader_sees_every_event_exactly_once_in_a_stable_order(
    engine: AsyncEngine, event_log: EventLog
) -> None:
    start = await event_log.feed_head()
    writers, per_writer = 8, 15
    rng = random.Random(7)
    done = asyncio.Event()

    async def writer(w: int) -> None:
        cid = uuid.uuid4()
        for i in range(per_writer):
            # Every other writer holds some transactions open, so positions
            # drawn early commit late: the case that makes sequences skip.
            hold = rng.uniform(0.01, 0.08) if w % 2 and i % 3 == 0 else 0.0
            await _slow_append(engine, cid, w * 1000 + i, hold)

    seen: list[RecordedEvent] = []

    async def tail() -> None:
        position: FeedPosition = start
        while True:
            batch = await event_log.read_feed(position, limit=7)
            seen.extend(batch)
            if batch:
                position = batch[-1].feed_position
            elif done.is_set() and len(seen) >= writers * per_writer:
                return
            else:
                await asyncio.sleep(0.005)

    reader = asyncio.create_task(tail())
    await asyncio.gather(*(writer(w) for w in range(writers)))
    done.set()
    await asyncio.wait_for(reader, timeout=30)

    numbers = [e.data["n"] for e in seen]
    assert len(numbers) == writers * per_writer
    assert len(set(numbers)) == len(numbers), "the tail saw an event twice"
    assert set(numbers) == {w * 1000 + i for w in range(writers) for i in range(per_writer)}
    # Every reader, at any later time, sees the same order.
    again = await event_log.read_feed(start, limit=10_000)
    assert [e.position for e in again] == [e.position for e in seen]


async def test_an_event_that_commits_late_is_not_skipped(
    engine: AsyncEngine, event_log: EventLog
) -> None:
    start = await event_log.feed_head()
    early, late = uuid.uuid4(), uuid.uuid4()

    async with engine.connect() as slow:
        transaction = await slow.begin()
        # The slow writer draws its position first…
        version = await lock_stream(slow, early, create=True)
        assert version is not None
        await write_events(slow, early, version, [NewEvent(type="written", data={"n": 1})])
        # …a second writer commits after it.
        await event_log.append(late, [NewEvent(type="written", data={"n": 2})])

        # While the first is open, a reader must not move past it.
        assert await event_log.read_feed(start) == []
        await transaction.commit()

    feed = await event_log.read_feed(start)
    assert [e.data["n"] for e in feed] == [1, 2]
