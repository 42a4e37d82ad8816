"""Writers to one conversation take a bounded share of the pool.

A write that takes the conversation's row lock (`write_session`) holds a
pooled connection while it waits for the lock, up to `lock_timeout`. When
the row is held for long — a stuck writer, a long transaction, an operator
in psql — every writer of that conversation waits on it, each on a
connection of its own, and a few dozen of them take the whole pool: every
other conversation's reads and writes then wait for a connection, or are
refused with 503. One bad conversation must not slow the rest.

So writers of one conversation pass a gate in this process before they
borrow a connection:

- at most `on_database` of them hold a connection at once (the row lock
  lets one write at a time anyway; a second one waiting on the database
  has its statements ready the moment the first commits);
- more wait here, in process, holding nothing, and are let in one at a
  time, in arrival order, as those on the database finish: a burst of
  writers on one conversation is written in turn, none refused;
- but when the conversation is stuck — no writer of it got through for
  `stuck_s` seconds (2), far longer than a write takes — the writers waiting
  are refused, and so is every new one at once, with `ConversationBusy`
  (409 with `Retry-After` over HTTP) until one gets through again; so are
  writers past `queued` waiting. Nothing was sent for them, so a retry with
  the same idempotency key or client message ids is safe. The
  `Retry-After` is one to `spread` times `retry_after`, at random: writers
  refused together and retrying on the dot would come back together, a
  burst every second that the other conversations' requests queue behind.

The optimistic appends (`optimistic`, `group_commit`) never wait for a
lock (a locked row is skipped), so only the locking path passes the gate.
Each worker process has its own gate: with `--workers N` a conversation
can have `N × on_database` connections.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from store.domain.errors import DEFAULT_RETRY_AFTER, ConversationBusy

# Writers of one conversation holding a connection at once.
ON_DATABASE = 2
# Writers of one conversation waiting in process, at most (a bound on memory).
QUEUED = 64
# No writer of a conversation got through for this long: it is stuck. A
# write under the lock takes milliseconds; on a loaded machine a few
# hundred, and a stall of a second was seen to refuse writers of a
# conversation that was only slow. Two seconds is still well within
# lock_timeout (5 s by default), which a writer on the database waits.
STUCK_S = 2.0


@dataclass
class _Entry:
    holders: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)
    moved: float = field(default_factory=time.monotonic)  # when a writer last got in or out


class ConversationGate:
    """Admission of writers, per conversation (see the module)."""

    def __init__(
        self,
        *,
        on_database: int = ON_DATABASE,
        queued: int = QUEUED,
        stuck_s: float = STUCK_S,
        retry_after: float = DEFAULT_RETRY_AFTER,
        spread: int = 3,
    ) -> None:
        if on_database < 1 or queued < 0 or stuck_s < 0:
            raise ValueError("a gate lets at least one writer in, and waits no negative time")
        self.on_database = on_database
        self.queued = queued
        self.stuck_s = stuck_s
        self.retry_after = retry_after
        self.spread = max(1, spread)
        self._entries: dict[uuid.UUID, _Entry] = {}
        self.refused = 0  # writers refused since the gate was made

    def holders(self, conversation_id: uuid.UUID) -> tuple[int, int]:
        """(writers holding a connection, writers waiting) for a conversation."""
        entry = self._entries.get(conversation_id)
        return (0, 0) if entry is None else (entry.holders, len(entry.waiting))

    @asynccontextmanager
    async def admitted(self, conversation_id: uuid.UUID) -> AsyncIterator[None]:
        """Inside, the writer may take a connection for the conversation;
        `ConversationBusy` when it may not (see the module)."""
        entry = self._entries.get(conversation_id)
        if entry is None:
            entry = self._entries[conversation_id] = _Entry()
        if entry.holders < self.on_database and not entry.waiting:
            entry.holders += 1
            entry.moved = time.monotonic()
        else:
            await self._wait(conversation_id, entry)
        try:
            yield
        finally:
            self._leave(conversation_id, entry)

    async def _wait(self, conversation_id: uuid.UUID, entry: _Entry) -> None:
        if len(entry.waiting) >= self.queued or self._stuck(entry):
            self._refuse(conversation_id, entry)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry.waiting.append(turn)
        try:
            # Until let in, or until nothing moved for `stuck_s` (the deadline
            # moves on each time a writer gets through).
            while not turn.done():
                left = entry.moved + self.stuck_s - time.monotonic()
                if left <= 0:
                    break
                await asyncio.wait({turn}, timeout=left)
        except BaseException:
            self._give_up(conversation_id, entry, turn)
            raise
        if not turn.done():
            self._give_up(conversation_id, entry, turn)
            self._refuse(conversation_id, entry)

    def _stuck(self, entry: _Entry) -> bool:
        return time.monotonic() - entry.moved > self.stuck_s

    def _give_up(
        self, conversation_id: uuid.UUID, entry: _Entry, turn: asyncio.Future[None]
    ) -> None:
        if turn.done() and not turn.cancelled():
            # Let in just as it gave up: pass the place on.
            self._leave(conversation_id, entry)
        else:
            turn.cancel()
            entry.waiting.remove(turn)
            self._forget_if_idle(conversation_id, entry)

    def _refuse(self, conversation_id: uuid.UUID, entry: _Entry) -> None:
        self.refused += 1
        self._forget_if_idle(conversation_id, entry)
        # Not for security: only to spread the retries.
        wait = self.retry_after * random.randint(1, self.spread)
        raise ConversationBusy(conversation_id, retry_after=wait)

    def _leave(self, conversation_id: uuid.UUID, entry: _Entry) -> None:
        # The place goes to the first writer still waiting (its holder
        # count unchanged), else it is freed.
        entry.moved = time.monotonic()
        while entry.waiting:
            turn = entry.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        entry.holders -= 1
        self._forget_if_idle(conversation_id, entry)

    def _forget_if_idle(self, conversation_id: uuid.UUID, entry: _Entry) -> None:
        if entry.holders == 0 and not entry.waiting:
            self._entries.pop(conversation_id, None)
