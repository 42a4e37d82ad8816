"""Readiness (`GET /ready`): does the storage answer, decided within a deadline.

An orchestrator probes readiness with a timeout of a second or two; a probe
that times out is as bad as a 503 and tells nobody why. So the answer is
given within `READY_DEADLINE_S` whatever the database does: up, it is a
200; refusing connections, unreachable, or accepting them and never
answering, it is a 503 `StorageUnavailable` with `Retry-After`.

The storage's ping waits for a pooled connection (up to the pool's wait,
`CONVO_POOL_WAIT_S`), and a statement cancelled on a connection whose
server stopped answering may itself wait to be cancelled. Neither is
awaited past the deadline: the ping runs as a task of its own, and the
probe answers when the deadline passes, leaving the task to end (it is
cancelled) on its own time. One ping at most is in flight: probes that
arrive while one runs wait for that one, so a hung database does not
collect a task per probe.
"""

from __future__ import annotations

import asyncio
import contextlib

from store.domain.errors import StorageUnavailable
from store.repository.port import Storage

# Within an orchestrator's usual 1–2 s probe timeout, with room for the HTTP round trip.
READY_DEADLINE_S = 0.8


class Readiness:
    """The ready check of one app: the storage's ping, within a deadline."""

    def __init__(self, deadline_s: float = READY_DEADLINE_S) -> None:
        self.deadline_s = deadline_s
        self._ping: asyncio.Task[None] | None = None

    async def check(self, storage: Storage) -> None:
        """Return when the storage answered; `StorageUnavailable` when it
        failed or did not answer within the deadline."""
        if self._ping is None or self._ping.done():
            self._ping = asyncio.get_running_loop().create_task(storage.ping())
            self._ping.add_done_callback(_retrieved)
        ping = self._ping
        done, _ = await asyncio.wait({ping}, timeout=self.deadline_s)
        if not done:
            ping.cancel()
            raise StorageUnavailable(
                f"the database did not answer within {self.deadline_s:g} s", retry_after=1
            )
        ping.result()  # the storage's own error, if it failed


def _retrieved(task: asyncio.Task[None]) -> None:
    # Its outcome was given to the probe that waited (or to none, past the
    # deadline): read here so asyncio does not log it as never retrieved.
    if not task.cancelled():
        with contextlib.suppress(Exception):
            task.exception()
