"""Fair under a stuck conversation (store.postgres.conversation_gate):
writers of one conversation hold at most two pooled connections; more wait
in process, in turn; once nothing got through for two seconds, the waiting
ones and every new one are refused with ConversationBusy (409 and
Retry-After over HTTP). Other conversations' reads and writes go
on meanwhile. (How fast they go is measured by bench/fairness.py, not
asserted here.)"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
import pytest_asyncio

from hosting.settings import Settings, libpq_url
from store.domain.errors import ConversationBusy
from store.domain.messages import Message
from store.postgres import PostgresStorage
from store.postgres.conversation_gate import ConversationGate
from store.repository import Repository

CID = uuid.UUID(int=1)


async def test_the_gate_lets_two_in_queues_a_few_and_refuses_the_rest_at_once() -> None:
    gate = ConversationGate(on_database=2, queued=3, stuck_s=30)
    release = asyncio.Event()
    entered: list[int] = []

    async def writer(n: int) -> str:
        try:
            async with gate.admitted(CID):
                entered.append(n)
                await release.wait()
        except ConversationBusy:
            return "busy"
        return "written"

    tasks = [asyncio.create_task(writer(n)) for n in range(10)]
    await asyncio.sleep(0.05)
    assert entered == [0, 1]
    assert gate.holders(CID) == (2, 3)
    refused = [t for t in tasks if t.done()]
    assert len(refused) == 5
    assert all(t.result() == "busy" for t in refused)
    release.set()
    results = await asyncio.gather(*tasks)
    assert results.count("written") == 5
    assert entered == [0, 1, 2, 3, 4]  # in arrival order
    assert gate.holders(CID) == (0, 0)
    assert gate.refused == 5


async def test_a_stuck_conversations_waiters_are_refused_and_then_newcomers_at_once() -> None:
    gate = ConversationGate(on_database=1, queued=4, stuck_s=0.2)
    held = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with gate.admitted(CID):
            held.set()
            await release.wait()

    task = asyncio.create_task(holder())
    await held.wait()
    started = time.perf_counter()
    with pytest.raises(ConversationBusy) as refused:
        async with gate.admitted(CID):
            pass
    assert 0.1 < time.perf_counter() - started < 5
    assert refused.value.retry_after in (
        1.0,
        2.0,
        3.0,
    )  # spread, so retries do not come back together
    assert gate.holders(CID) == (1, 0)
    started = time.perf_counter()
    with pytest.raises(ConversationBusy):  # still stuck: at once
        async with gate.admitted(CID):
            pass
    assert time.perf_counter() - started < 0.1
    release.set()
    await task
    async with gate.admitted(CID):  # free again
        assert gate.holders(CID) == (1, 0)
    assert gate.holders(CID) == (0, 0)


async def test_a_burst_on_a_moving_conversation_is_written_in_turn() -> None:
    gate = ConversationGate(on_database=2, stuck_s=0.2)
    order: list[int] = []

    async def writer(n: int) -> None:
        async with gate.admitted(CID):
            await asyncio.sleep(0.02)  # each write takes a while, the burst far longer
            order.append(n)

    await asyncio.gather(*(writer(n) for n in range(40)))
    assert sorted(order) == list(range(40))
    assert gate.refused == 0


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    gate = ConversationGate(on_database=1, queued=4, stuck_s=30)
    release = asyncio.Event()

    async def writer() -> None:
        async with gate.admitted(CID):
            await release.wait()

    first = asyncio.create_task(writer())
    second = asyncio.create_task(writer())
    await asyncio.sleep(0.02)
    assert gate.holders(CID) == (1, 1)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert gate.holders(CID) == (1, 0)
    release.set()
    await first
    assert gate.holders(CID) == (0, 0)


# --- on PostgreSQL ------------------------------------------------------------------------

POOL = 6
WRITERS = 40


@pytest_asyncio.fixture
async def small_pool(database_url: str, settings: Settings) -> AsyncIterator[PostgresStorage]:
    storage = await PostgresStorage.connect(
        database_url, options=settings.connection_options(), max_size=POOL, timeout=5.0
    )
    yield storage
    await storage.close()


async def test_a_locked_conversation_takes_at_most_two_connections_and_others_go_on(
    small_pool: PostgresStorage, database_url: str
) -> None:
    repository = Repository(small_pool)
    await repository.create_conversation("stuck")
    await repository.create_conversation("other")
    await repository.append_messages("other", [Message(role="user", content="warm")])
    # Someone holds the stuck conversation's row (a long transaction).
    locker = await psycopg.AsyncConnection.connect(libpq_url(database_url))
    try:
        await locker.execute(
            "SELECT 1 FROM conversations WHERE key = 'stuck' FOR UPDATE",
        )
        stuck_id = uuid.UUID(
            str(
                (
                    await (
                        await locker.execute("SELECT id FROM conversations WHERE key = 'stuck'")
                    ).fetchone()
                    or [None]
                )[0]
            )
        )

        async def stuck_append(n: int) -> str:
            started = time.perf_counter()
            try:
                await repository.append_messages(
                    "stuck", [Message(role="user", content=f"s{n}", client_message_id=f"s{n}")]
                )
            except ConversationBusy:
                return "busy" if time.perf_counter() - started < 4.0 else "busy-later"
            return "written"

        stuck = [asyncio.create_task(stuck_append(n)) for n in range(WRITERS)]
        await asyncio.sleep(0.3)
        assert small_pool.gate.holders(stuck_id)[0] <= 2
        # Meanwhile the other conversation is read and written, from the pool.
        started = time.perf_counter()
        for n in range(10):
            await repository.append_messages("other", [Message(role="user", content=f"o{n}")])
            assert len(await repository.visible_window("other")) == n + 2
        other_took = time.perf_counter() - started
        still_locked = not all(t.done() for t in stuck)
        # Seen stuck: the waiting writers are refused, the two on the database wait.
        await asyncio.wait(stuck, timeout=3.0)  # the two wait for lock_timeout (5 s)
        assert small_pool.gate.holders(stuck_id)[1] == 0
        await locker.rollback()  # the lock is let go
        results = await asyncio.gather(*stuck)
    finally:
        await locker.close()
    assert still_locked, "the stuck writers ended before the others ran: nothing was shown"
    # Well below the 5 s a request would wait for a pooled connection.
    assert other_took < 4.5, f"other conversation: {other_took:.2f} s for 10 appends and reads"
    # Two on the database, the rest refused once the conversation was seen stuck.
    assert results.count("written") + results.count("busy-later") <= 2
    written = results.count("written")
    window = await repository.visible_window("stuck")
    assert len(window) == written  # each acknowledged append stored once, nothing else
