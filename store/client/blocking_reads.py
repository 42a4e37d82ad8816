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
from collections.abc import AsyncIterator, Callable, Generator
from typing import Self, TypeVar

import httpx

from store.client.asynchronous import AsyncConvoClient
from store.client.blocking import (
    Portal,
    async_sleep,
    iterates,
    runs,
    sending_through,
    threaded,
)
from store.client.retrying import RetryPolicy
from store.client.wire import DEFAULT_TIMEOUT, Call

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

    # --- reads: each the async client's method of the same name, blocking ---------------

    visible_window = runs(AsyncConvoClient.visible_window)
    read_window = runs(AsyncConvoClient.read_window)
    read_messages = runs(AsyncConvoClient.read_messages)
    page_messages = runs(AsyncConvoClient.page_messages)
    iter_messages = iterates(AsyncConvoClient.iter_messages)
    recent_by_role = runs(AsyncConvoClient.recent_by_role)
    role_range = runs(AsyncConvoClient.role_range)
    count_by_role = runs(AsyncConvoClient.count_by_role)
    tool_blocks = runs(AsyncConvoClient.tool_blocks)
    search_messages = runs(AsyncConvoClient.search_messages)
    iter_search = iterates(AsyncConvoClient.iter_search)
    assemble = runs(AsyncConvoClient.assemble)
    export = iterates(AsyncConvoClient.export)

    # --- the feed ---------------------------------------------------------------------

    read_events = runs(AsyncConvoClient.read_events)
    iter_events = iterates(AsyncConvoClient.iter_events)
    conversation_events = runs(AsyncConvoClient.conversation_events)
    iter_conversation_events = iterates(AsyncConvoClient.iter_conversation_events)
    tail = iterates(AsyncConvoClient.tail)


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
