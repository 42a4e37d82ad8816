"""The repository's reads of the log: the tenant's feed (a page, or tailed
forever), one conversation's events, and the conversations changed since a
time (store.domain.feed; export builds on these, store.repository.export).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime

from store.domain import feed
from store.domain.conversation_keys import addressed
from store.domain.errors import InvalidOperation
from store.domain.feed import ChangedConversation, FeedEvent, FeedPage
from store.domain.feed_vector import FeedVector, as_vector, parse_position
from store.domain.records import FeedPosition
from store.repository.write_path import RepositoryPart


class Feed(RepositoryPart):
    """The tenant's events, in feed order."""

    def feed_position(self, after: FeedVector | FeedPosition | str) -> FeedVector:
        """`after` as a vector of this feed's partitions: a token (or a
        checkpoint from before partitions) parsed, a position as one of the
        first partition; `InvalidOperation` naming what is wrong, or a
        partition this feed does not have."""
        vector = as_vector(after)
        assert vector is not None
        return vector.check_partitions(self.storage.feed_partitions)

    async def read_events(
        self, *, after: FeedVector | FeedPosition | str | None = None, limit: int = 100
    ) -> FeedPage:
        """This tenant's events after the checkpoint `after` (None: from the
        start), in feed order; an event that commits late is never skipped."""
        feed.check_limit(limit)
        start = FeedVector.origin() if after is None else self.feed_position(after)
        return await self.storage.tenant_feed(self.tenant, start, limit)

    async def feed_head(self) -> FeedVector:
        """Where a reader that wants only events from now on starts."""
        return await self.storage.feed_head()

    async def tail(
        self,
        after: FeedVector | FeedPosition | str | None,
        *,
        heartbeat: float = feed.HEARTBEAT_SECONDS,
        limit: int = feed.MAX_FEED_LIMIT,
    ) -> AsyncIterator[FeedPage]:
        """The tenant's feed after `after` (None: from now on), page by page, forever.

        Yields each page with events as soon as it is read, and an empty page
        (`events == []`, with the checkpoint reached) once every `heartbeat`
        seconds without any.
        """
        position = self.feed_position(after) if after is not None else await self.feed_head()
        quiet_since = time.monotonic()
        while True:
            page = await self.read_events(after=position, limit=limit)
            position = parse_position(page.next)
            if page.events or time.monotonic() - quiet_since >= heartbeat:
                quiet_since = time.monotonic()
                yield page
            if page.more:
                continue
            remaining = heartbeat - (time.monotonic() - quiet_since)
            await self.storage.wait_for_feed(max(remaining, 0.0))

    @addressed
    async def conversation_events(
        self, conversation_id: uuid.UUID, *, from_version: int = 1, limit: int = 100
    ) -> list[FeedEvent]:
        """The conversation's events from version `from_version` on, in order."""
        feed.check_limit(limit)
        if from_version < 1:
            raise InvalidOperation(f"from_version must be >= 1, got {from_version}")
        return await self.storage.conversation_events(
            conversation_id, self.tenant, from_version - 1, limit
        )

    async def changed_conversations(
        self, since: datetime, *, after: uuid.UUID | None = None, limit: int = 100
    ) -> list[ChangedConversation]:
        """This tenant's conversations changed at or after `since`, by id."""
        feed.check_limit(limit)
        return await self.storage.changed_conversations(self.tenant, since, after, limit)
