"""Blocking code driving the async client: the portal and the sync transports.

`ConvoClient` keeps no implementation of its own: it runs
`AsyncConvoClient`'s coroutines on an event loop it owns, in a thread of
its own (the portal), and blocks until each is done. So the two clients
cannot drift apart, and the blocking one works where a loop already runs
(a notebook, a sync framework called from async code): its coroutines never
touch the caller's loop.

A caller of the blocking client may still hand it blocking httpx parts (an
`httpx.Client`, an `httpx.BaseTransport`); `ThreadedTransport` sends through
them from the portal's loop, each request and each chunk of an answer in a
worker thread, so one slow answer does not hold up the other threads
sharing the client.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

T = TypeVar("T")
P = ParamSpec("P")


def runs(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[Any, P], T]:
    """The blocking twin of an `AsyncConvoClient` method: the same
    parameters (typed from the async method, so the two cannot drift), run
    on the blocking client's portal. The blocking client holds the async
    one as `_client` and its portal as `_portal`."""
    name = method.__name__

    @functools.wraps(method)
    def blocking(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = self._portal.run(getattr(self._client, name)(*args, **kwargs))
        return result

    return blocking


def iterates(
    method: Callable[Concatenate[Any, P], AsyncIterator[T]],
) -> Callable[Concatenate[Any, P], Generator[T, None, None]]:
    """The blocking twin of an `AsyncConvoClient` iterator (pages, the
    export, the SSE tail): each item fetched on the portal. The generator
    holds the blocking client, so `ConvoClient(url).iter_messages(...)` is
    not closed under its own loop while it is read."""
    name = method.__name__

    @functools.wraps(method)
    def blocking(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> Generator[T, None, None]:
        yield from self._portal.iterate(getattr(self._client, name)(*args, **kwargs))

    return blocking


class Portal:
    """An event loop running in a daemon thread of its own, and a way in from
    any other thread. Daemon, so a client nobody closed does not keep the
    interpreter alive at exit."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name="convo-client", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            # The generators left open (a tail never closed) and the worker
            # threads end with the loop, so nothing outlives the client.
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    @property
    def open(self) -> bool:
        return not self._stopped

    @property
    def in_its_thread(self) -> bool:
        """Whether the caller runs on the portal's own loop (where blocking
        on it would wait for ever)."""
        return threading.current_thread() is self._thread

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the portal's loop; its result, or its error, here."""
        if self.in_its_thread or self._stopped:
            coroutine.close()
            raise RuntimeError(
                "the client is closed" if self._stopped else "called from the client's own loop"
            )
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            # Interrupted (Ctrl-C in a notebook): the request stops too,
            # rather than running on unseen. (Done already: nothing to stop.)
            future.cancel()
            raise

    def iterate(self, items: AsyncIterator[T]) -> Generator[T, None, None]:
        """`items` as a blocking iterator: each item fetched on the loop.
        Closing the iterator (or letting it go) closes `items`, so a stream
        it reads is closed then, not when the client is."""
        try:
            while True:
                try:
                    yield self.run(_next(items))
                except StopAsyncIteration:
                    return
        finally:
            close = getattr(items, "aclose", None)
            if close is not None and self.open and not self.in_its_thread:
                self.run(close())

    def stop(self) -> None:
        """Stop the loop and wait for its thread (a second stop does nothing)."""
        if self._stopped:
            return
        self._stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        if not self.in_its_thread:
            self._thread.join()


async def _next(items: AsyncIterator[T]) -> T:
    return await anext(items)


def async_sleep(sleep: Callable[[float], None] | None) -> Callable[[float], Awaitable[None]] | None:
    """A blocking `sleep` (tests record the waits with one) for the async
    client, run in a worker thread so the loop keeps serving."""
    if sleep is None:
        return None

    async def slept(seconds: float) -> None:
        await asyncio.to_thread(sleep, seconds)

    return slept


class ThreadedTransport(httpx.AsyncBaseTransport):
    """A blocking `send` (a transport's, or a whole `httpx.Client`'s) as an
    async transport: the request and each chunk of its answer in a worker
    thread. `close`: what closing the transport closes (None: nothing, for
    a client that is the caller's to close)."""

    def __init__(
        self,
        send: Callable[[httpx.Request], httpx.Response],
        close: Callable[[], None] | None = None,
    ) -> None:
        self._send = send
        self._close = close

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await asyncio.to_thread(self._send, request)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_ThreadedStream(response),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        if self._close is not None:
            await asyncio.to_thread(self._close)


class _ThreadedStream(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._response.is_stream_consumed:  # an answer made whole (a stub transport's)
            yield self._response.content
            return
        # The raw bytes, as they came: the async response decodes them by
        # the same headers.
        chunks = iter(self._response.iter_raw())
        while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
            yield chunk

    async def aclose(self) -> None:
        await asyncio.to_thread(self._response.close)


def threaded(transport: httpx.BaseTransport) -> ThreadedTransport:
    return ThreadedTransport(transport.handle_request, transport.close)


def sending_through(http: httpx.Client) -> httpx.AsyncClient:
    """An async client sending through a caller's blocking one: its base URL,
    headers and timeout, and its `send` (auth, cookies, hooks, redirects)."""
    return httpx.AsyncClient(
        base_url=http.base_url,
        headers=http.headers,
        params=http.params,
        timeout=http.timeout,
        transport=ThreadedTransport(lambda request: http.send(request, stream=True)),
    )
