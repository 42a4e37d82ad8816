"""Waking live tails with LISTEN/NOTIFY, at most one notification per
`NOTIFY_DELAY` of commits, riding on an append's own statement when one
goes out.

A tailing reader that has caught up waits for "the feed may have moved".
PostgreSQL serialises the commits of every notifying transaction (a
database-wide lock from pre-commit until the commit is flushed), so a
`pg_notify` in every append would be a global write lock (docs/export-and-
feed.md, "How the tail is woken", says what it cost the writers). So each
storage (one per process) notifies at most once per `NOTIFY_DELAY`: the
optimistic append statement that goes out when none was sent for that long
carries it (`carry`: `append_sql.append_cte(guarded=True)`, its `notify`
parameter), which costs no round trip, no statement and no commit of its
own; a commit no such statement covered (`committed`: a write under the
lock, or an append within the delay of the last notification) gets a
`NOTIFY` of its own `NOTIFY_DELAY` later, unless an append carried one
meanwhile. Each storage keeps one `LISTEN` connection that wakes every tail
waiting in that process.

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
import time
from typing import Any, NamedTuple

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

CHANNEL = "convo_feed"
NOTIFY_DELAY = 0.005  # seconds: commits within it share one NOTIFY
SAFETY_INTERVAL = 1.0  # seconds a waiting tail re-reads without a notification
RECONNECT_DELAY = 1.0  # seconds before a lost LISTEN connection is opened again

_log = logging.getLogger("convo.feed")


class Carrying(NamedTuple):
    """A statement carries the notification (`FeedSignal.carry`): when, and
    what the signal knew before."""

    at: float
    last: float
    pending: bool


class FeedSignal:
    """One process's side of the feed's LISTEN/NOTIFY."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        self.pool = pool
        # When the last notification went out (sent, or carried by an
        # append), and whether a commit since is not covered by one.
        self._last = -NOTIFY_DELAY
        self._pending = False
        self._timer: asyncio.TimerHandle | None = None
        self._notifier: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._moved = asyncio.Event()

    # --- the writers' side -------------------------------------------------------

    def carry(self) -> Carrying | None:
        """Should the append statement about to be sent notify? Yes when no
        notification went out for `NOTIFY_DELAY`: it then covers every
        commit reported before it, and its own. (A statement that carried
        it but wrote nothing, or failed, hands it back: `not_carried`.)"""
        now = time.monotonic()
        if now - self._last < NOTIFY_DELAY:
            return None
        carrying = Carrying(at=now, last=self._last, pending=self._pending)
        self._last = now
        self._pending = False
        return carrying

    def not_carried(self, carrying: Carrying) -> None:
        """The statement that was to carry the notification wrote nothing
        (or failed): as if it had not been asked (`carry`)."""
        if self._last == carrying.at:  # the next statement may carry it
            self._last = carrying.last
        if carrying.pending:
            self.committed()

    def committed(self) -> None:
        """A write of this process committed and no statement of its own
        notified: notify within `NOTIFY_DELAY` (never blocks it)."""
        self._pending = True
        if self._timer is None and (self._notifier is None or self._notifier.done()):
            self._timer = asyncio.get_running_loop().call_later(NOTIFY_DELAY, self._due)

    def _due(self) -> None:
        self._timer = None
        if self._pending:  # no append carried a notification meanwhile
            self._notifier = asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        # A commit during the NOTIFY sets `_pending` again: one more round.
        while self._pending:
            self._pending = False
            self._last = time.monotonic()
            try:
                async with self.pool.connection() as conn:
                    await conn.execute(f"NOTIFY {CHANNEL}")
            except Exception as error:  # tails still re-read every SAFETY_INTERVAL
                _log.debug("feed notification not sent: %s", type(error).__name__)
                return
            if self._pending:
                await asyncio.sleep(NOTIFY_DELAY)

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
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in (self._notifier, self._listener):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
