"""Reads on a real streaming standby (store.postgres.replicas): analysts'
reads go to it, agents' reads see their own writes whatever it has
replayed, and a standby that is paused, too far behind or stopped costs
reads nothing but a trip to the primary, counted."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from bench.standby import StandbyPair
from store import Message, Repository
from store.domain.search import search_query
from store.postgres.replicas import format_lsn, parse_lsn, read_after
from tests.replicas.conftest import watched

pytestmark = [pytest.mark.slow]


def _user(text: str) -> Message:
    return Message(role="user", content=text)


async def _replayed(storage_pair: StandbyPair, seconds: float = 30.0) -> None:
    await asyncio.to_thread(storage_pair.wait_replayed, seconds)


async def test_analysts_reads_are_answered_by_the_standby(pair: StandbyPair) -> None:
    async with watched(pair) as seen:
        repo = Repository(seen.storage, tenant=f"t-{uuid.uuid4().hex[:8]}")
        cid = (await repo.create_conversation("routed")).id
        await repo.append_messages(cid, [_user("the parser test is flaky"), _user("again")])
        await _replayed(pair)
        await seen.storage.replicas.poll()  # type: ignore[union-attr]
        # What the primary answers, read there.
        page = await repo.list_conversations()
        assert seen.last_route() == ("analyst", True)
        assert [c.id for c in page.items] == [cid]
        history = await repo.read_messages(cid)
        assert seen.last_route() == ("analyst", True)
        assert [m.content for m in history] == ["the parser test is flaky", "again"]
        hits = await repo.search_messages(search_query(q="parser"))
        assert seen.last_route() == ("analyst", True)
        assert [h.seq for h in hits.hits] == [1]
        feed = await repo.read_events()
        assert seen.last_route() == ("analyst", True)
        assert len(feed.events) >= 3  # created, two messages
        events = await repo.conversation_events(cid)
        assert seen.last_route() == ("analyst", True)
        assert [e.version for e in events] == [e.version for e in feed.events]
        # Agents' reads: this storage wrote the conversation and the standby
        # has replayed past that write, so it may answer them too.
        window = await repo.visible_window(cid)
        assert seen.last_route() == ("agent", True)
        assert len(window) == 2
        # The standby really is one.
        replica = seen.replicas()[0]
        async with replica.pool.connection() as conn:
            row = await (await conn.execute("SELECT pg_is_in_recovery()")).fetchone()
        assert row == (True,)
        assert seen.skips("down") == seen.skips("lagging") == 0


async def test_agents_read_their_writes_while_the_standby_replay_is_paused(
    pair: StandbyPair,
) -> None:
    async with watched(pair) as seen:
        repo = Repository(seen.storage, tenant=f"t-{uuid.uuid4().hex[:8]}")
        cid = (await repo.create_conversation("paused")).id
        await repo.append_messages(cid, [_user("before the pause")])
        await _replayed(pair)
        pair.pause_replay()
        try:
            with read_after() as consistency:
                await repo.append_messages(cid, [_user("while paused")])
            token = consistency.written
            assert token is not None
            await seen.storage.replicas.poll()  # type: ignore[union-attr]
            # The agent's reads see the write: the primary answered.
            window = await repo.visible_window(cid)
            assert [m.content for m in window] == ["before the pause", "while paused"]
            assert seen.last_route() == ("agent", False)
            recent = await repo.recent_by_role(cid, "user", 1)
            assert [m.content for m in recent] == ["while paused"]
            assembly = await repo.assemble(cid, format="openai-chat")
            assert "while paused" in str(assembly.payload)
            # An analyst's read of the standby may be stale: here it is.
            history = await repo.read_messages(cid)
            assert seen.last_route() == ("analyst", True)
            assert [m.content for m in history] == ["before the pause"]
            # Another process knows nothing of the write but its token.
            async with watched(pair) as other:
                elsewhere = Repository(other.storage, tenant=repo.tenant)
                await elsewhere.visible_window(cid)
                assert other.last_route() == ("agent", False)  # no token: the primary
                with read_after(parse_lsn(format_lsn(token))):
                    history = await elsewhere.read_messages(cid)
                assert other.last_route() == ("analyst", False)
                assert [m.content for m in history][-1] == "while paused"
        finally:
            pair.resume_replay()
        await _replayed(pair)
        await seen.storage.replicas.poll()  # type: ignore[union-attr]
        window = await repo.visible_window(cid)
        assert seen.last_route() == ("agent", True)  # replayed past the write now
        assert [m.content for m in window][-1] == "while paused"


async def test_a_standby_further_behind_than_the_bound_is_skipped(pair: StandbyPair) -> None:
    async with watched(pair, max_lag_ms=200) as seen:
        repo = Repository(seen.storage, tenant=f"t-{uuid.uuid4().hex[:8]}")
        cid = (await repo.create_conversation("lagging")).id
        await _replayed(pair)
        pair.pause_replay()
        try:
            await repo.append_messages(cid, [_user("not on the standby")])
            deadline = time.monotonic() + 10
            while seen.storage.replicas.status()[0]["lag_s"] < 0.2:  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "the lag never passed the bound"
                await asyncio.sleep(0.05)
            history = await repo.read_messages(cid)
            assert [m.content for m in history] == ["not on the standby"]
            assert seen.last_route() == ("analyst", False)
            assert seen.skips("lagging") >= 1
        finally:
            pair.resume_replay()
        await _replayed(pair)
        await seen.storage.replicas.poll()  # type: ignore[union-attr]
        await repo.read_messages(cid)
        assert seen.last_route() == ("analyst", True)


async def test_reads_keep_succeeding_when_the_standby_stops_mid_load(pair: StandbyPair) -> None:
    async with watched(pair) as seen:
        repo = Repository(seen.storage, tenant=f"t-{uuid.uuid4().hex[:8]}")
        cids = [(await repo.create_conversation(f"load-{i}")).id for i in range(4)]
        stop = asyncio.Event()
        reads = 0

        async def agent(cid: str) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                await repo.append_messages(cid, [_user(f"message {n}")])
                window = await repo.visible_window(cid)
                assert window[-1].content == f"message {n}"

        async def analyst() -> None:
            nonlocal reads
            while not stop.is_set():
                await repo.list_conversations()
                await repo.search_messages(search_query(q="message"))
                for cid in cids:
                    await repo.read_messages(cid, order="desc", limit=5)
                reads += 1

        load = [asyncio.create_task(agent(cid)) for cid in cids]
        load += [asyncio.create_task(analyst()) for _ in range(2)]
        try:
            await asyncio.sleep(0.5)
            assert ("analyst", True) in seen.routes
            await asyncio.to_thread(pair.standby.stop, "immediate")
            before = reads
            await asyncio.sleep(1.0)
            assert reads > before  # reads went on, on the primary
        finally:
            stop.set()
            await asyncio.gather(*load)  # none failed
            await asyncio.to_thread(pair.standby.start, "-c fsync=off")
        assert seen.skips("down") + seen.skips("failed") >= 1
        await asyncio.to_thread(pair.wait_streaming)
        # Back in use once its pool has reconnected and a look found it near.
        deadline = time.monotonic() + 20
        while True:
            await repo.list_conversations()
            if seen.last_route() == ("analyst", True):
                break
            assert time.monotonic() < deadline, "the standby was never used again"
            await asyncio.sleep(0.1)


async def test_a_tail_on_the_standby_gets_new_events_without_waiting_for_a_heartbeat(
    pair: StandbyPair,
) -> None:
    async with watched(pair) as seen:
        repo = Repository(seen.storage, tenant=f"t-{uuid.uuid4().hex[:8]}")
        cid = (await repo.create_conversation("tailed")).id
        await _replayed(pair)
        await seen.storage.replicas.poll()  # type: ignore[union-attr]
        head = await repo.feed_head()
        pages = repo.tail(head, heartbeat=60)

        async def first_events() -> list[str]:
            async for page in pages:
                if page.events:
                    return [e.type for e in page.events]
            return []  # pragma: no cover - the tail never ends

        waiting = asyncio.create_task(first_events())
        await asyncio.sleep(0.3)  # the tail has read the feed to its end and waits
        await repo.append_messages(cid, [_user("news")])
        # Woken by the primary's signal, it reads once the standby has the event:
        # long before the heartbeat.
        assert await asyncio.wait_for(waiting, timeout=20) == ["message_appended"]
        await pages.aclose()  # type: ignore[attr-defined]
        assert ("analyst", True) in seen.routes
