"""Reading a tenant's feed in tests, through the repository (`read_events`),
until the events a test committed show: PostgreSQL's feed holds an event
back while any transaction of the cluster that began before it is open,
other tests' too, so a test waits for what it knows was committed."""

from __future__ import annotations

import asyncio

from store.domain.feed import FeedEvent
from store.domain.feed_vector import FeedVector, parse_position
from store.domain.records import FeedPosition
from store.repository import Repository

FEED_PATIENCE = 30.0  # seconds a test waits for events it knows were committed


async def feed_until(
    repository: Repository,
    after: FeedVector | FeedPosition,
    count: int,
    *,
    key: str | None = None,
) -> list[FeedEvent]:
    """The tenant's events after `after` (conversation `key`'s only, if
    given), page after page, once there are at least `count`; fails after
    `FEED_PATIENCE` seconds."""
    deadline = asyncio.get_running_loop().time() + FEED_PATIENCE
    while True:
        events: list[FeedEvent] = []
        position = after
        while True:
            page = await repository.read_events(after=position, limit=1000)
            events += [e for e in page.events if key is None or e.conversation_id == key]
            position = parse_position(page.next)
            if not page.more:
                break
        if len(events) >= count:
            return events
        assert asyncio.get_running_loop().time() < deadline, f"{len(events)} of {count} events"
        await asyncio.sleep(0.02)
