"""A private event loop in a daemon thread, for the sync half of a sync+async API."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

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


def run_sync(coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None) -> T:
    """Run `coroutine` on `loop` (default: the background loop) and wait for it.

    Refuses to be called from a coroutine running on that same loop (it would
    wait for itself forever)."""
    target = loop or background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is target:
        coroutine.close()
        raise RuntimeError(
            "a sync method was called on the event loop it must run on; use the async method"
        )
    return asyncio.run_coroutine_threadsafe(coroutine, target).result()
