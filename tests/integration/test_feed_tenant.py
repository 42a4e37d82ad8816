"""A tenant's feed on PostgreSQL, with real commits: it never skips an event
that commits late and never shows another tenant's events — read in pages
(`Repository.read_events`) and tailed live over HTTP (`GET /events/stream`).

A write is held open after its events are inserted (their positions drawn)
and before it commits, by `HoldingStorage` (tests/integration/
test_log_concurrency.py), through the real append path.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.domain.feed import FeedEvent, scan_limit
from store.domain.feed_vector import FIRST_PARTITION, FeedVector, parse_position
from store.domain.messages import Message
from store.domain.records import FeedPosition, RecordedEvent
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.api.test_feed import SSE
from tests.feed_reading import feed_until
from tests.integration.conftest import read_feed_until
from tests.integration.test_log_concurrency import HoldingStorage

BASE_URL = "http://convo.test"


@pytest.fixture
def acme(storage: PostgresStorage) -> Repository:
    return Repository(storage, tenant="acme")


@pytest.fixture
def globex(storage: PostgresStorage) -> Repository:
    return Repository(storage, tenant="globex")


def user(text: str) -> Message:
    return Message(role="user", content=text)


def contents(events: list[FeedEvent]) -> list[str]:
    return [e.data["message"]["content"] for e in events if e.type == "message_appended"]


def checkpoint(position: FeedPosition) -> str:
    return FeedVector.single(position).token()


async def held_write(
    storage: PostgresStorage, tenant: str
) -> tuple[Repository, asyncio.Event, asyncio.Event]:
    """A repository whose writes hold their transaction open, after their
    events are inserted, until `release` is set; `written` says they are."""
    written, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        written.set()
        await release.wait()

    return Repository(HoldingStorage(storage.pool, hold), tenant=tenant), written, release


async def test_a_tenants_feed_never_skips_an_event_that_commits_late(
    storage: PostgresStorage, acme: Repository, globex: Repository
) -> None:
    early = (await acme.create_conversation()).id
    late = (await acme.create_conversation()).id
    theirs = (await globex.create_conversation()).id
    [*_, last] = await feed_until(acme, FeedPosition.start(), 2)
    mark = parse_position(last.checkpoint)

    slow, written, release = await held_write(storage, "acme")
    slow_append = asyncio.create_task(slow.append_messages(early, [user("1")]))
    try:
        await asyncio.wait_for(written.wait(), timeout=10)
        await acme.append_messages(late, [user("2")])
        await globex.append_messages(theirs, [user("globex")])
        # The held event drew the lower position; nothing after it may show.
        page = await acme.read_events(after=mark)
        assert page.events == []
        # A reader that stops here and resumes from this checkpoint…
        resume = parse_position(page.next)
    finally:
        release.set()
        await slow_append

    # …loses nothing, and sees the first write first.
    feed = await feed_until(acme, resume, 2)
    assert contents(feed) == ["1", "2"]
    assert [e.conversation_id for e in feed] == [str(early), str(late)]
    assert all(e.data.get("tenant") != "globex" for e in feed)
    assert contents(await feed_until(globex, FeedPosition.start(), 2)) == ["globex"]


async def test_a_quiet_tenant_moves_past_other_tenants_events_in_bounded_pages(
    acme: Repository, globex: Repository
) -> None:
    theirs = (await globex.create_conversation()).id
    for i in range(5):
        await globex.append_messages(theirs, [user(f"g{i}a"), user(f"g{i}b"), user(f"g{i}c")])
    ours = (await acme.create_conversation()).id
    await acme.append_messages(ours, [user("mine")])
    await feed_until(globex, FeedPosition.start(), 16)

    pages = []
    position: FeedVector | FeedPosition = FeedPosition.start()
    while True:
        # limit 1 scans at most 10 events of the global feed per page
        page = await acme.read_events(after=position, limit=1)
        pages.append(page)
        position = parse_position(page.next)
        if not page.more:
            break
    events = [e for p in pages for e in p.events]
    assert [e.type for e in events] == ["conversation_started", "message_appended"]
    assert {e.conversation_id for e in events} == {str(ours)}
    assert len(pages) >= 3
    assert pages[0].events == []  # ten of globex's: nothing of ours, but the checkpoint moves
    assert parse_position(pages[0].next).at(FIRST_PARTITION).position > 0


def expected_page(
    feed: list[RecordedEvent], tenant_of: dict[str, str], tenant: str, start: int, limit: int
) -> tuple[list[str], str, bool]:
    """A tenant's page, by the rule (as `store.memory` keeps it): the
    tenant's events among the next `scan_limit(limit)` of the global feed,
    stopping before its `limit + 1`-th; the page ends at the last event it
    passed. Checkpoints of its events, the next checkpoint, `more`."""
    scanned = feed[start : start + scan_limit(limit)]
    mine: list[str] = []
    last = feed[start - 1].feed_position if start else FeedPosition.start()
    for event in scanned:
        ours = tenant_of[str(event.conversation_id)] == tenant
        if ours and len(mine) == limit:
            break
        last = event.feed_position
        if ours:
            mine.append(checkpoint(event.feed_position))
    return mine, checkpoint(last), len(scanned) >= scan_limit(limit) or len(mine) >= limit


async def test_every_page_of_a_tenants_feed_follows_the_rule(
    storage: PostgresStorage, acme: Repository, globex: Repository
) -> None:
    # Runs of each tenant's events of every length from 1 to 5, so that pages
    # of every small limit start, fill up and stop on either tenant's events.
    tenants = {"acme": acme, "globex": globex}
    streams = {name: (await r.create_conversation()).id for name, r in tenants.items()}
    for run, name in enumerate(["acme", "globex", "globex", "acme", "globex", "acme"] * 2):
        count = run % 5 + 1
        await tenants[name].append_messages(
            streams[name], [user(f"{name} {run}.{i}") for i in range(count)]
        )
    # Once every event shows: the feed holds back what a transaction still
    # open elsewhere on the server might precede.
    feed = await read_feed_until(
        storage, FeedPosition.start(), 2 + sum(run % 5 + 1 for run in range(12))
    )
    async with storage.pool.connection() as conn:  # the feed names streams by their row's id
        rows = await (await conn.execute("SELECT id, tenant FROM conversations")).fetchall()
    tenant_of = {str(cid): tenant for cid, tenant in rows}
    assert len(feed) == 2 + sum(run % 5 + 1 for run in range(12))

    for name, repository in tenants.items():
        for limit in (1, 2, 3, 5):
            for start in range(len(feed) + 1):
                after = feed[start - 1].feed_position if start else FeedPosition.start()
                page = await repository.read_events(after=after, limit=limit)
                events, following, more = expected_page(feed, tenant_of, name, start, limit)
                assert ([e.checkpoint for e in page.events], page.next, page.more) == (
                    events,
                    following,
                    more,
                ), (name, limit, start)


async def test_the_live_tail_never_skips_a_late_commit_nor_shows_another_tenant(
    storage: PostgresStorage, settings: Settings, acme: Repository, globex: Repository
) -> None:
    keys = MemoryKeys()
    acme_key, globex_key = keys.create("acme", "t"), keys.create("globex", "t")
    app = create_app(
        settings,
        services=Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
    )
    early = (await acme.create_conversation()).id
    late = (await acme.create_conversation()).id
    theirs = (await globex.create_conversation()).id
    await feed_until(acme, FeedPosition.start(), 2)
    await feed_until(globex, FeedPosition.start(), 1)

    slow, written, release = await held_write(storage, "acme")
    async with (
        SSE(app, acme_key, "heartbeat=0.1") as ours,
        SSE(app, globex_key, "heartbeat=0.1") as others,
    ):
        await ours.until(lambda text: ": connected" in text)
        await others.until(lambda text: ": connected" in text)
        slow_append = asyncio.create_task(slow.append_messages(early, [user("1")]))
        try:
            await asyncio.wait_for(written.wait(), timeout=10)
            await acme.append_messages(late, [user("2")])
            await globex.append_messages(theirs, [user("globex")])
            # Heartbeats go by while the first write is open: "2" must wait for it.
            await ours.until(lambda text: text.count(": heartbeat") >= 2)
            assert ours.events() == []
        finally:
            release.set()
            await slow_append
        await ours.until(lambda text: text.count("\ndata: ") >= 2)
        await others.until(lambda text: text.count("\ndata: ") >= 1)
    sent = ours.events()
    assert [e["data"]["data"]["message"]["content"] for e in sent] == ["1", "2"]
    assert [e["data"]["conversation_id"] for e in sent] == [str(early), str(late)]
    assert [e["data"]["conversation_id"] for e in others.events()] == [str(theirs)]


async def test_changed_conversations_by_time_and_tenant(
    acme: Repository, globex: Repository
) -> None:
    old = await acme.create_conversation()
    await globex.create_conversation()
    gone = await acme.create_conversation()
    await acme.delete(gone.id)
    since = (await acme.get_conversation(old.id)).started_at + timedelta(microseconds=1)
    await asyncio.sleep(0.01)
    fresh = [(await acme.create_conversation()).id for _ in range(3)]
    await acme.append_messages(old.id, [user("touched")])

    changed = await acme.changed_conversations(since)
    assert sorted(c.key for c in changed) == sorted([*fresh, old.id])
    assert [c.id for c in changed] == sorted(c.id for c in changed)
    paged = []
    after = None
    while page := await acme.changed_conversations(since, after=after, limit=2):
        paged += page
        after = page[-1].id
    assert paged == changed


async def test_the_http_feed_pages_over_postgres(
    storage: PostgresStorage, settings: Settings, acme: Repository
) -> None:
    keys = MemoryKeys()
    key = keys.create("acme", "t")
    app = create_app(
        settings,
        services=Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
    )
    cid = (await acme.create_conversation()).id
    await acme.append_messages(cid, [user(f"m{i}") for i in range(5)])
    await feed_until(acme, FeedPosition.start(), 6)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url=BASE_URL, headers={"X-API-Key": key}
    ) as client:
        page = (await client.get("/events", params={"limit": 4})).json()
        assert [e["version"] for e in page["events"]] == [1, 2, 3, 4]
        rest = (await client.get("/events", params={"after": page["next"]})).json()
        assert [e["version"] for e in rest["events"]] == [5, 6]
        assert rest["more"] is False
