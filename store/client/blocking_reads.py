"""The blocking client's reads: the window, history pages, role queries, tool
blocks, search, assembly and the event feed with its SSE tail, and the
paging iterators; and what the blocking client is made of: an
`AsyncConvoClient` and the portal that runs it (store.client.blocking).
Each method runs the async client's method of the same name, so there is
one implementation of each request, its retries and its errors.
`ConvoClient` adds the writes.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from typing import Any, Literal, Self, TypeVar

import httpx
from pydantic import BaseModel

from store.client.asynchronous import AsyncConvoClient
from store.client.blocking import Portal, async_sleep, sending_through, threaded
from store.client.retrying import RetryPolicy
from store.client.wire import DEFAULT_TIMEOUT, PAGE, Assembled, Call
from store.domain.conversation_keys import ConversationRef
from store.domain.feed import FeedEvent, FeedPage
from store.domain.feed_vector import FeedVector
from store.domain.listing import MessagePage, WindowSlice
from store.domain.messages import MAIN_AGENT, Role, StoredMessage
from store.domain.records import FeedPosition
from store.domain.search import SearchHit, SearchPage, SearchQuery
from store.domain.values import Scope, ToolBlock

T = TypeVar("T")


class BlockingReads:
    """Everything the client reads (the writes: `ConvoClient`, which says
    what each argument is)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        idempotency_keys: bool = True,
        http: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        # A transport that is async too (`httpx.MockTransport`) is sent
        # through as it is; a blocking one from worker threads.
        sending: httpx.AsyncBaseTransport | None = None
        if isinstance(transport, httpx.AsyncBaseTransport):
            sending = transport
        elif transport is not None:
            sending = threaded(transport)
        self._portal = Portal()
        self._client = AsyncConvoClient(
            base_url,
            api_key=api_key,
            retry=retry,
            timeout=timeout,
            idempotency_keys=idempotency_keys,
            http=None if http is None else sending_through(http),
            transport=sending,
            sleep=async_sleep(sleep),
        )
        # Run by `close()`, or when the client is let go unclosed (or at
        # exit), so a forgotten client leaves no thread or connection behind.
        # It holds the portal and the async client, never this client.
        self._closing = weakref.finalize(
            self, _close, self._portal, self._client, sending_through=http is not None
        )

    @property
    def retry(self) -> RetryPolicy:
        return self._client.retry

    @property
    def idempotency_keys(self) -> bool:
        return self._client.idempotency_keys

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections (not a caller's `http`) and end the portal's thread."""
        self._closing()

    def call(self, call: Call[T]) -> T:
        """Send `call`, retrying as `retry` says; its answer, or the error it stands for."""
        return self._portal.run(self._client.call(call))

    def _iterate(self, items: AsyncIterator[T]) -> Generator[T, None, None]:
        # A generator of the client's own, so that an iteration holds the
        # client (and its loop) alive: `ConvoClient(url).iter_messages(...)`
        # would otherwise be closed under its own loop.
        yield from self._portal.iterate(items)

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
        return self._portal.run(
            self._client.visible_window(conversation_id, batch=batch, agent_id=agent_id)
        )

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
        return self._portal.run(
            self._client.read_window(
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
        return self._portal.run(
            self._client.read_messages(
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
        return self._portal.run(
            self._client.page_messages(
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
        return self._iterate(
            self._client.iter_messages(
                conversation_id,
                order=order,
                role=role,
                agent_id=agent_id,
                kind=kind,
                scope=scope,
                page_size=page_size,
            )
        )

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
        return self._portal.run(
            self._client.recent_by_role(
                conversation_id, role=role, n=n, scope=scope, agent_id=agent_id
            )
        )

    def role_range(
        self, conversation_id: ConversationRef, /, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        return self._portal.run(
            self._client.role_range(conversation_id, role=role, first=first, last=last)
        )

    def count_by_role(
        self, conversation_id: ConversationRef, /, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        return self._portal.run(self._client.count_by_role(conversation_id, scope=scope))

    def tool_blocks(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        pending_only: bool = False,
        agent_id: str | None = None,
    ) -> list[ToolBlock]:
        return self._portal.run(
            self._client.tool_blocks(conversation_id, pending_only=pending_only, agent_id=agent_id)
        )

    def search_messages(self, query: SearchQuery) -> SearchPage:
        return self._portal.run(self._client.search_messages(query=query))

    def iter_search(self, query: SearchQuery) -> Iterator[SearchHit]:
        """Every hit of `query`, newest first, page after page."""
        return self._iterate(self._client.iter_search(query=query))

    def assemble(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        agent_id: str = MAIN_AGENT,
        format: str = "openai-chat",
        options: dict[str, Any] | BaseModel | None = None,
    ) -> Assembled:
        return self._portal.run(
            self._client.assemble(
                conversation_id, agent_id=agent_id, format=format, options=options
            )
        )

    def export(
        self, conversation_id: ConversationRef, /, *, events: bool = False
    ) -> Generator[dict[str, Any], None, None]:
        """The conversation as the service exports it, one JSON object per
        line (docs/export-and-feed.md): a typed message per line, or with `events`
        the raw event log. Streamed: a long conversation is never held whole."""
        return self._iterate(self._client.export(conversation_id, events=events))

    # --- the feed ---------------------------------------------------------------------

    def read_events(
        self, *, after: FeedVector | FeedPosition | str | None = None, limit: int = 100
    ) -> FeedPage:
        return self._portal.run(self._client.read_events(after=after, limit=limit))

    def iter_events(
        self, *, after: FeedVector | FeedPosition | str | None = None, page_size: int = PAGE
    ) -> Iterator[FeedEvent]:
        """The tenant's events after `after` (None: from the start) up to the
        feed's current end, page after page (`tail` waits for more)."""
        return self._iterate(self._client.iter_events(after=after, page_size=page_size))

    def conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, limit: int = 100
    ) -> list[FeedEvent]:
        return self._portal.run(
            self._client.conversation_events(
                conversation_id, from_version=from_version, limit=limit
            )
        )

    def iter_conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, page_size: int = PAGE
    ) -> Iterator[FeedEvent]:
        """The conversation's events from `from_version` on, page after page."""
        return self._iterate(
            self._client.iter_conversation_events(
                conversation_id, from_version=from_version, page_size=page_size
            )
        )

    def tail(
        self,
        after: FeedVector | FeedPosition | str | None = None,
        *,
        heartbeat: float | None = None,
    ) -> Generator[FeedEvent, None, None]:
        """The tenant's events as they commit (Server-Sent Events), forever.

        `after`: a checkpoint to start after (None: from now on). A stream
        that breaks is opened again after the last event or heartbeat seen
        (`Last-Event-ID`), so no event is skipped or repeated; the breaks
        in a row are retried as `retry` says. Close it (`close()`) to close
        the stream at once."""
        return self._iterate(self._client.tail(after=after, heartbeat=heartbeat))


def _close(portal: Portal, client: AsyncConvoClient, *, sending_through: bool) -> None:
    """Close the async client's connections, then the portal. The async
    client sending through a caller's `http` is the client's own to close
    (the caller's stays open: closing it is the caller's)."""
    try:
        if not portal.in_its_thread:
            portal.run(client.aclose())
            if sending_through:
                portal.run(client.http.aclose())
    finally:
        portal.stop()
