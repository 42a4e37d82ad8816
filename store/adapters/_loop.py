"""A private event loop in a daemon thread, for the sync half of a sync+async API."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine
from typing import TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The adapters' shared background loop (started on first use).

    A repository whose storage holds connections (PostgresStorage's pool)
    belongs to the loop it was connected on: for sync calls, connect it on
    this loop (`run_sync(PostgresStorage.connect(url))`)."""
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="convo-store-adapters", daemon=True
            )
            thread.start()
            _loop = loop
        return _loop


def run_sync(awaitable: Awaitable[T], loop: asyncio.AbstractEventLoop | None = None) -> T:
    """Run `awaitable` (a coroutine, or any awaitable such as
    `PostgresStorage.connect(url)`) on `loop` (default: the background
    loop) and wait for it.

    Refuses to be called from a coroutine running on that same loop (it would
    wait for itself forever)."""
    target = loop or background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    coroutine = awaitable if isinstance(awaitable, Coroutine) else _awaited(awaitable)
    if running is target:
        coroutine.close()
        raise RuntimeError(
            "a sync method was called on the event loop it must run on; use the async method"
        )
    return asyncio.run_coroutine_threadsafe(coroutine, target).result()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable
