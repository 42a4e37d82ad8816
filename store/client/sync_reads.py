"""The blocking client's reads: the window, history pages, role queries, tool
blocks, search, assembly and the event feed with its SSE tail; and the
paging iterators that read a whole listing, history, search or feed a page
at a time. `ConvoClient` adds the writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterator
from typing import Any, Literal

from pydantic import BaseModel

from store.client import calls, wire
from store.client.problems import error_from
from store.client.retrying import retryable, wait_before_retry
from store.client.sse import EventStreamReader
from store.client.sync_sender import Sender
from store.client.wire import PAGE, Assembled
from store.domain.conversation_keys import ConversationRef
from store.domain.feed import FeedEvent, FeedPage, checkpoint, parse_checkpoint
from store.domain.listing import MessagePage, WindowSlice
from store.domain.messages import MAIN_AGENT, Role, StoredMessage
from store.domain.records import FeedPosition
from store.domain.search import SearchHit, SearchPage, SearchQuery
from store.domain.values import Scope, ToolBlock


class Reads(Sender):
    """Everything the client reads (the writes: `ConvoClient`)."""

    # --- reads ------------------------------------------------------------------------

    def visible_window(
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
            page = self.read_window(
                conversation_id, batch=batch, agent_id=agent_id, cursor=cursor, limit=PAGE
            )
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def read_window(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        batch: int | None = None,
        agent_id: str | None = None,
        cursor: str | None = None,
        limit: int = PAGE,
    ) -> WindowSlice:
        return self.call(
            calls.read_window(
                conversation_id, batch=batch, agent_id=agent_id, cursor=cursor, limit=limit
            )
        )

    def read_messages(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
        role: Role | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        scope: Scope = "history",
    ) -> list[StoredMessage]:
        page = self.page_messages(
            conversation_id,
            after_seq=after_seq,
            before_seq=before_seq,
            limit=limit,
            order=order,
            role=role,
            agent_id=agent_id,
            kind=kind,
            scope=scope,
        )
        return list(page.items)

    def page_messages(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
        role: Role | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        scope: Scope = "history",
    ) -> MessagePage:
        return self.call(
            calls.page_messages(
                conversation_id,
                after_seq=after_seq,
                before_seq=before_seq,
                limit=limit,
                order=order,
                role=role,
                agent_id=agent_id,
                kind=kind,
                scope=scope,
            )
        )

    def iter_messages(
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
    ) -> Iterator[StoredMessage]:
        """Every message (of `role`, `agent_id`, `kind`), oldest or newest
        first, read a page at a time."""
        after: int | None = None
        before: int | None = None
        while True:
            page = self.page_messages(
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
            yield from page.items
            after, before = page.next_after_seq, page.next_before_seq
            if after is None and before is None:
                return

    def recent_by_role(
        self,
        conversation_id: ConversationRef,
        /,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        return self.call(calls.recent_by_role(conversation_id, role, n, scope, agent_id))

    def role_range(
        self, conversation_id: ConversationRef, /, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        return self.call(calls.role_range(conversation_id, role, first, last))

    def count_by_role(
        self, conversation_id: ConversationRef, /, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        return self.call(calls.count_by_role(conversation_id, scope))

    def tool_blocks(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        pending_only: bool = False,
        agent_id: str | None = None,
    ) -> list[ToolBlock]:
        return self.call(
            calls.tool_blocks(conversation_id, pending_only=pending_only, agent_id=agent_id)
        )

    def search_messages(self, query: SearchQuery) -> SearchPage:
        return self.call(calls.search_messages(query))

    def iter_search(self, query: SearchQuery) -> Iterator[SearchHit]:
        """Every hit of `query`, newest first, page after page."""
        while True:
            page = self.search_messages(query)
            yield from page.hits
            if page.next_cursor is None:
                return
            query = query.model_copy(update={"cursor": page.next_cursor})

    def assemble(
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
        return self.call(
            calls.assemble(conversation_id, agent_id=agent_id, format=format, options=options)
        )

    def export(
        self, conversation_id: ConversationRef, /, *, events: bool = False
    ) -> Generator[dict[str, Any], None, None]:
        """The conversation as the service exports it, one JSON object per
        line (docs/export-and-feed.md): a typed message per line, or with `events`
        the raw event log. Streamed: a long conversation is never held whole."""
        call = calls.export(conversation_id, events=events)
        with self.http.stream(call.method, call.path, params=call.params) as response:
            if response.is_error:
                response.read()
                raise error_from(response, conversation_id=call.conversation_id)
            for line in response.iter_lines():
                if line:
                    yield json.loads(line)

    # --- the feed ---------------------------------------------------------------------

    def read_events(self, *, after: FeedPosition | None = None, limit: int = 100) -> FeedPage:
        return self.call(calls.read_events(after, limit))

    def iter_events(
        self, *, after: FeedPosition | None = None, page_size: int = PAGE
    ) -> Iterator[FeedEvent]:
        """The tenant's events after `after` (None: from the start) up to the
        feed's current end, page after page (`tail` waits for more)."""
        while True:
            page = self.read_events(after=after, limit=page_size)
            yield from page.events
            after = parse_checkpoint(page.next)
            if not page.more:
                return

    def conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, limit: int = 100
    ) -> list[FeedEvent]:
        return self.call(
            calls.conversation_events(conversation_id, from_version=from_version, limit=limit)
        )

    def iter_conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, page_size: int = PAGE
    ) -> Iterator[FeedEvent]:
        """The conversation's events from `from_version` on, page after page."""
        while True:
            events = self.conversation_events(
                conversation_id, from_version=from_version, limit=page_size
            )
            yield from events
            if len(events) < page_size:
                return
            from_version = events[-1].version + 1

    def tail(
        self,
        after: FeedPosition | str | None = None,
        *,
        heartbeat: float | None = None,
    ) -> Generator[FeedEvent, None, None]:
        """The tenant's events as they commit (Server-Sent Events), forever.

        `after`: a checkpoint to start after (None: from now on). A stream
        that breaks is opened again after the last event or heartbeat seen
        (`Last-Event-ID`), so no event is skipped or repeated; the breaks
        in a row are retried as `retry` says. Close it (`close()`) to close
        the stream."""
        reader = EventStreamReader(checkpoint(after) if isinstance(after, FeedPosition) else after)
        params = wire.query(heartbeat=heartbeat)
        failures = 0
        while True:
            headers = {} if reader.last_id is None else {"Last-Event-ID": reader.last_id}
            try:
                with self.http.stream(
                    "GET", "/events/stream", params=params, headers=headers, timeout=None
                ) as response:
                    if response.is_error:
                        response.read()
                        raise error_from(response)
                    failures = 0
                    for line in response.iter_lines():
                        event = reader.line(line)
                        if event is not None:
                            yield event
                # The service ended the stream (it is shutting down): open it again.
            except Exception as error:
                failures += 1
                if not retryable(True)(error) or failures >= self.retry.attempts:
                    raise
                (self._sleep or time.sleep)(wait_before_retry(self.retry, failures, error))
