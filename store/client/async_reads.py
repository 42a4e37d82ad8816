"""The async client's reads: the window, history pages, role queries, tool
blocks, search, assembly and the event feed with its SSE tail; and the
paging iterators that read a whole listing, history, search or feed a page
at a time. `AsyncConvoClient` adds the writes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Literal, ParamSpec

from pydantic import BaseModel

from store.client import calls, wire
from store.client.async_sender import AsyncSender
from store.client.derived import forwarding, page_items
from store.client.problems import error_from
from store.client.retrying import retryable, wait_before_retry
from store.client.sse import EventStreamReader
from store.client.wire import PAGE, Assembled
from store.domain.conversation_keys import ConversationRef
from store.domain.feed import FeedEvent, FeedPage
from store.domain.feed_vector import FeedVector, position_token
from store.domain.messages import MAIN_AGENT, Role, StoredMessage
from store.domain.records import FeedPosition
from store.domain.search import SearchHit, SearchPage, SearchQuery
from store.domain.values import Scope
from store.repository import Repository

P = ParamSpec("P")


class AsyncReads(AsyncSender):
    """Everything the client reads (the writes: `AsyncConvoClient`)."""

    # --- reads ------------------------------------------------------------------------

    async def visible_window(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        batch: int | None = None,
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        """The whole window, read a page at a time."""
        found: list[StoredMessage] = []
        cursor: str | None = None
        while True:
            page = await self.read_window(
                conversation_id, batch=batch, agent_id=agent_id, cursor=cursor, limit=PAGE
            )
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    read_window = forwarding(Repository.read_window, calls.read_window)

    page_messages = forwarding(Repository.page_messages, calls.page_messages)

    read_messages = page_items(page_messages, name="read_messages")

    async def iter_messages(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        order: Literal["asc", "desc"] = "asc",
        role: Role | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        scope: Scope = "history",
        page_size: int = PAGE,
    ) -> AsyncIterator[StoredMessage]:
        """Every message (of `role`, `agent_id`, `kind`), oldest or newest
        first, read a page at a time."""
        after: int | None = None
        before: int | None = None
        while True:
            page = await self.page_messages(
                conversation_id,
                after_seq=after,
                before_seq=before,
                limit=page_size,
                order=order,
                role=role,
                agent_id=agent_id,
                kind=kind,
                scope=scope,
            )
            for message in page.items:
                yield message
            after, before = page.next_after_seq, page.next_before_seq
            if after is None and before is None:
                return

    async def recent_by_role(
        self,
        conversation_id: ConversationRef,
        /,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        return await self.call(calls.recent_by_role(conversation_id, role, n, scope, agent_id))

    async def role_range(
        self, conversation_id: ConversationRef, /, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        return await self.call(calls.role_range(conversation_id, role, first, last))

    async def count_by_role(
        self, conversation_id: ConversationRef, /, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        return await self.call(calls.count_by_role(conversation_id, scope))

    tool_blocks = forwarding(Repository.tool_blocks, calls.tool_blocks)

    async def search_messages(self, query: SearchQuery) -> SearchPage:
        return await self.call(calls.search_messages(query))

    async def iter_search(self, query: SearchQuery) -> AsyncIterator[SearchHit]:
        """Every hit of `query`, newest first, page after page."""
        while True:
            page = await self.search_messages(query)
            for hit in page.hits:
                yield hit
            if page.next_cursor is None:
                return
            query = query.model_copy(update={"cursor": page.next_cursor})

    async def assemble(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        agent_id: str = MAIN_AGENT,
        format: str = "openai-chat",
        options: dict[str, Any] | BaseModel | None = None,
    ) -> Assembled:
        if isinstance(options, BaseModel):
            options = options.model_dump(mode="json", exclude_unset=True)
        return await self.call(
            calls.assemble(conversation_id, agent_id=agent_id, format=format, options=options)
        )

    async def export(
        self, conversation_id: ConversationRef, /, *, events: bool = False
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The conversation as the service exports it, one JSON object per
        line (docs/export-and-feed.md): a typed message per line, or with `events`
        the raw event log. Streamed: a long conversation is never held whole."""
        call = calls.export(conversation_id, events=events)
        async with self.http.stream(call.method, call.path, params=call.params) as response:
            if response.is_error:
                await response.aread()
                raise error_from(response, conversation_id=call.conversation_id)
            async for line in response.aiter_lines():
                if line:
                    yield json.loads(line)

    # --- the feed ---------------------------------------------------------------------

    async def read_events(
        self, *, after: FeedVector | FeedPosition | str | None = None, limit: int = 100
    ) -> FeedPage:
        return await self.call(calls.read_events(after, limit))

    async def iter_events(
        self, *, after: FeedVector | FeedPosition | str | None = None, page_size: int = PAGE
    ) -> AsyncIterator[FeedEvent]:
        """The tenant's events after `after` (None: from the start) up to the
        feed's current end, page after page (`tail` waits for more)."""
        while True:
            page = await self.read_events(after=after, limit=page_size)
            for event in page.events:
                yield event
            after = page.next  # the token as the service wrote it: read on from it
            if not page.more:
                return

    conversation_events = forwarding(Repository.conversation_events, calls.conversation_events)

    async def iter_conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, page_size: int = PAGE
    ) -> AsyncIterator[FeedEvent]:
        """The conversation's events from `from_version` on, page after page."""
        while True:
            events = await self.conversation_events(
                conversation_id, from_version=from_version, limit=page_size
            )
            for event in events:
                yield event
            if len(events) < page_size:
                return
            from_version = events[-1].version + 1

    async def tail(
        self,
        after: FeedVector | FeedPosition | str | None = None,
        *,
        heartbeat: float | None = None,
    ) -> AsyncGenerator[FeedEvent, None]:
        """The tenant's events as they commit (Server-Sent Events), forever.

        `after`: a checkpoint to start after (None: from now on). A stream
        that breaks is opened again after the last event or heartbeat seen
        (`Last-Event-ID`), so no event is skipped or repeated; the breaks
        in a row are retried as `retry` says. Close it (`aclose()`, or
        iterate it in `contextlib.aclosing`) to close the stream at once."""
        reader = EventStreamReader(position_token(after))
        params = wire.query(heartbeat=heartbeat)
        failures = 0
        while True:
            headers = {} if reader.last_id is None else {"Last-Event-ID": reader.last_id}
            try:
                async with self.http.stream(
                    "GET", "/events/stream", params=params, headers=headers, timeout=None
                ) as response:
                    if response.is_error:
                        await response.aread()
                        raise error_from(response)
                    failures = 0
                    async for line in response.aiter_lines():
                        event = reader.line(line)
                        if event is not None:
                            yield event
                # The service ended the stream (it is shutting down): open it again.
            except Exception as error:
                failures += 1
                if not retryable(True)(error) or failures >= self.retry.attempts:
                    raise
                await (self._sleep or asyncio.sleep)(wait_before_retry(self.retry, failures, error))
