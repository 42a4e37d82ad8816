"""Waking live tails with LISTEN/NOTIFY, kept off the append's path.

A tailing reader that has caught up waits for "the feed may have moved".
The obvious signal, a `pg_notify` inside each append's own statement, makes
PostgreSQL serialise the commits of every notifying transaction (a
database-wide lock from pre-commit until the commit is flushed): a global
write lock (docs/export-and-feed.md, "How the tail is woken", says what it
cost the writers). So the writers' transactions never notify. Instead,
each storage (one per process) sends one `NOTIFY` on its own after its
writes commit, coalescing a burst of commits into one notification
(`NOTIFY_DELAY`), with at most one in flight; and each storage keeps one
`LISTEN` connection that wakes every tail waiting in that process.

A notification says "something committed", not "readable": the feed
returns nothing above the oldest transaction still open anywhere, so a
woken reader may find nothing new yet. Tails therefore also re-read after
`SAFETY_INTERVAL` without a notification, which covers writers outside
convo-store, a lost listener connection, and that horizon.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

CHANNEL = "convo_feed"
NOTIFY_DELAY = 0.005  # seconds: commits within it share one NOTIFY
SAFETY_INTERVAL = 1.0  # seconds a waiting tail re-reads without a notification
RECONNECT_DELAY = 1.0  # seconds before a lost LISTEN connection is opened again

_log = logging.getLogger("convo.feed")


class FeedSignal:
    """One process's side of the feed's LISTEN/NOTIFY."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        self.pool = pool
        self._pending = False
        self._notifier: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._moved = asyncio.Event()

    # --- the writers' side -------------------------------------------------------

    def committed(self) -> None:
        """A write of this process committed: notify soon (never blocks it)."""
        self._pending = True
        if self._notifier is None or self._notifier.done():
            self._notifier = asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        # A commit during the NOTIFY sets `_pending` again: one more round.
        while self._pending:
            await asyncio.sleep(NOTIFY_DELAY)
            self._pending = False
            try:
                async with self.pool.connection() as conn:
                    await conn.execute(f"NOTIFY {CHANNEL}")
            except Exception as error:  # tails still re-read every SAFETY_INTERVAL
                _log.debug("feed notification not sent: %s", type(error).__name__)
                return

    # --- the tails' side -----------------------------------------------------------

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        """Until a notification arrives, or `timeout` (at most SAFETY_INTERVAL)."""
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(self._listen())
        moved = self._moved
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(moved.wait(), min(timeout, SAFETY_INTERVAL))

    def _wake(self) -> None:
        # Waiters hold the old event; the next ones wait on a fresh one.
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    async def _listen(self) -> None:
        while True:
            try:
                conn = await AsyncConnection.connect(await self._conninfo(), autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self._wake()  # anything committed before LISTEN: read again
                    async for _ in conn.notifies():
                        self._wake()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                _log.debug("feed listener lost: %s", type(error).__name__)
                await asyncio.sleep(RECONNECT_DELAY)

    async def _conninfo(self) -> str:
        """The pool's connection string (psycopg_pool may hold a function)."""
        conninfo = self.pool.conninfo
        if callable(conninfo):
            found = conninfo()
            return found if isinstance(found, str) else await found
        return conninfo

    async def close(self) -> None:
        for task in (self._notifier, self._listener):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
