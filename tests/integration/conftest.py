"""Integration fixtures: the PostgreSQL storage on the test's own database,
a repository over it, and a patient reader of the global feed.

The feed only returns events of transactions below the oldest one still
running anywhere in the cluster (store/postgres/feed.py), so a test that
shares its server with other sessions may see an append a moment late,
never out of order: `read_feed_until` polls for what a test expects instead
of assuming the feed is current the instant an append returns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from hosting.settings import Settings
from store.domain.events import MessageAppended, from_data
from store.domain.messages import Message
from store.domain.records import FeedPosition, RecordedEvent
from store.postgres import PostgresStorage
from store.postgres.feed import FEED_PARTITION
from store.repository import Repository
from tests.feed_reading import FEED_PATIENCE


@pytest_asyncio.fixture
async def storage(database_url: str, settings: Settings) -> AsyncIterator[PostgresStorage]:
    storage = await PostgresStorage.connect(
        database_url, options=settings.connection_options(), max_size=24
    )
    yield storage
    await storage.close()


@pytest.fixture
def repository(storage: PostgresStorage) -> Repository:
    return Repository(storage)


async def own_head(storage: PostgresStorage) -> FeedPosition:
    """The feed's head in the server's own partition (`read_feed`'s positions)."""
    return (await storage.feed_head()).at(FEED_PARTITION)


async def read_feed_until(
    storage: PostgresStorage,
    after: FeedPosition,
    count: int,
    *,
    limit: int = 10_000,
    patience: float = FEED_PATIENCE,
) -> list[RecordedEvent]:
    """The feed after `after`, once it holds at least `count` events.

    Fails if they do not all appear within `patience` seconds. It may return
    more than `count`: callers compare exactly what they got.
    """
    deadline = time.monotonic() + patience
    while True:
        events = await storage.read_feed(after, limit)
        if len(events) >= count:
            return events
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the feed shows {len(events)} of {count} committed events after {patience:g} s"
            )
        await asyncio.sleep(0.01)


async def settled_head(storage: PostgresStorage, events_so_far: int) -> FeedPosition:
    """Where the feed ends once the `events_so_far` events committed show."""
    feed = await read_feed_until(storage, FeedPosition.start(), events_so_far)
    assert len(feed) == events_so_far
    return feed[-1].feed_position if feed else FeedPosition.start()


def user(text: str, client_id: str | None = None) -> Message:
    return Message(role="user", content=text, client_message_id=client_id)


def texts(events: list[RecordedEvent]) -> list[str | None]:
    """Each event's message text (None for an event that is not a message)."""
    decoded = [from_data(e.type, e.data) for e in events]
    return [e.message.text if isinstance(e, MessageAppended) else None for e in decoded]
