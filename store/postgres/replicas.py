"""Reads on streaming standbys: which server answers each read.

A storage given replica URLs (`PostgresStorage.connect(url, replicas=[...])`)
keeps a pool per standby beside the primary's, and every read goes through
`ReplicaSet.read`, which picks the server:

- an analyst's read (listing, history pages, search, export, the feed) goes
  to a standby that answers and is at most `max_lag_ms` behind, in turn
  (round robin); none such: the primary;
- an agent's read of one conversation (its window, a role's last messages,
  a payload build) must see every write it may know of: a standby only
  when it has replayed past the conversation's last write — its commit's
  WAL position (LSN), remembered by this storage for the conversations it
  wrote last (`MAX_REMEMBERED`), or a consistency token the caller carries
  (`read_after`: what the HTTP API's `Convo-Consistency` header sets).
  Knowing neither, the primary answers: a write made by another process
  can only be known to be on a standby by its token.

Whatever a standby does, the read succeeds: one that is down, not a
standby any more (promoted), or too far behind is skipped (counted by the
`on_skip` callback, one log line when it starts being skipped and one when
it is back), and a read that fails on it is read again on the primary. So
is one a standby answers with `ConversationNotFound`: it may only be a
conversation the standby has not replayed yet.

How far behind a standby is, without asking the primary on every read: a
task (`_watch`) asks each standby every `POLL_S` how far it has replayed,
and the primary where its WAL ends, remembering the primary's answers of
the last seconds. A standby is as far behind as the time since the primary
first wrote past what the standby has replayed. That counts a standby cut
off from its primary (whose own figures look caught up) and one whose
replay is paused. A standby's replayed position only grows while it runs
(a restart breaks its connections, and those reads go to the primary), so
one measured a moment ago is a safe lower bound for routing an agent's read.

The write path pays no round trip for this: the commit's LSN is read by a
statement sent after `COMMIT` in the same pipeline (`COMMIT_LSN`), and only
when the storage has replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

from store.domain.errors import ConversationNotFound
from store.postgres.pooled import Pool, Reader, open_pool, pooled
from store.postgres.urls import libpq_url

T = TypeVar("T")

AGENT: Reader = "agent"
ANALYST: Reader = "analyst"
# Why a standby was not used: it does not answer, it is not a standby (any
# more), it is further behind than the bound, or a read on it failed.
SkipReason = Literal["down", "not_standby", "lagging", "failed"]
SKIP_REASONS: tuple[SkipReason, ...] = ("down", "not_standby", "lagging", "failed")

# How often each standby (and the primary's WAL end) is asked, and how long
# an answer may take before the standby counts as down.
POLL_S = 0.1
POLL_TIMEOUT_S = 1.0
# A replica's pool: how long a read waits for one of its connections before
# it is read on the primary instead.
REPLICA_POOL_WAIT_S = 1.0
# Conversations whose last write's LSN a storage remembers, at most.
MAX_REMEMBERED = 10_000
# The most a header's token may say, and its text's length: `XXXXXXXX/XXXXXXXX`.
MAX_LSN = (1 << 64) - 1
MAX_TOKEN_CHARS = 17

# Sent after COMMIT, in the same sync: where the WAL ends, at or past the
# commit's record (insert position: the commit is in it even before a flush).
# When the WAL ends exactly at a page's end, the insert position is already
# past the next page's header (24 bytes; 40 on a segment's first page), where
# a standby's replay position stops at the page's end: the header is stepped
# back over, or a standby that has replayed everything would look behind.
# The sizes come from `current_setting`, not the `pg_settings` view, which
# builds every setting's row each time: with replicas, this follows every write.
COMMIT_LSN = (
    "SELECT CASE WHEN lsn % segment = 40 THEN lsn - 40"
    " WHEN lsn % block = 24 AND lsn % segment <> 24 THEN lsn - 24 ELSE lsn END"
    " FROM (SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint AS lsn,"
    " current_setting('wal_block_size')::bigint AS block,"
    " pg_size_bytes(current_setting('wal_segment_size')) AS segment) AS w"
)
PRIMARY_LSN = "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint"
STANDBY_STATE = "SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint"

_log = logging.getLogger("convo.storage")


def format_lsn(lsn: int) -> str:
    """An LSN as PostgreSQL writes it: `16/B374D848`."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """An LSN from PostgreSQL's text form; `ValueError` for anything else."""
    if len(text) > MAX_TOKEN_CHARS or text.count("/") != 1:
        raise ValueError("an LSN is two hexadecimal numbers joined by '/', like 16/B374D848")
    high, low = text.split("/")
    digits = set("0123456789abcdefABCDEF")
    if not (0 < len(high) <= 8 and 0 < len(low) <= 8) or not set(high + low) <= digits:
        raise ValueError("an LSN is two hexadecimal numbers joined by '/', like 16/B374D848")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass
class Consistency:
    """What one request (or block of code) needs of the servers it reads,
    and what it wrote: `after`, a position its reads must see (a client's
    token), `written`, the last commit position of its writes (what the
    client may send back)."""

    after: int | None = None
    written: int | None = None


_consistency: ContextVar[Consistency | None] = ContextVar("convo_consistency", default=None)


@contextlib.contextmanager
def read_after(lsn: int | None = None) -> Iterator[Consistency]:
    """Within the block, reads see at least the commit at `lsn` (a token a
    writer handed out), and the block's writes are noted in the yielded
    `Consistency.written` (the token to hand on)."""
    consistency = Consistency(after=lsn)
    token = _consistency.set(consistency)
    try:
        yield consistency
    finally:
        _consistency.reset(token)


def server_name(url: str) -> str:
    """`host:port/database` of a URL: a label without the user or password."""
    parts = conninfo_to_dict(libpq_url(url))
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


@dataclass(eq=False)
class Replica:
    """A standby's pool and what the last look at it found."""

    name: str
    pool: Pool
    answered: bool = False  # the last poll (or read) got an answer
    standby: bool = False
    replayed: int = 0  # how far it has replayed, at least
    lag_s: float | None = None  # None: not known yet
    skipped: SkipReason | None = None  # what the last log line said, if it is skipped

    def unusable(self, max_lag_s: float) -> SkipReason | None:
        """Why an analyst's read may not use it now, if it may not."""
        if not self.answered:
            return "down"
        if not self.standby:
            return "not_standby"
        if self.lag_s is None or self.lag_s > max_lag_s:
            return "lagging"
        return None


@dataclass
class _PrimaryWal:
    """The primary's WAL end as asked lately: (monotonic time, LSN), oldest first."""

    samples: deque[tuple[float, int]] = field(default_factory=deque)

    def add(self, at: float, lsn: int, keep_s: float) -> None:
        self.samples.append((at, lsn))
        while self.samples and self.samples[0][0] < at - keep_s:
            self.samples.popleft()

    def lag(self, replayed: int, now: float, keep_s: float) -> float:
        """Seconds since the primary was first seen past `replayed` (0: it
        has not been); at least `keep_s` when it already was at the oldest
        sample kept."""
        for index, (at, lsn) in enumerate(self.samples):
            if lsn > replayed:
                return max(now - at, keep_s) if index == 0 else now - at
        return 0.0


SkipListener = Callable[[str, SkipReason], None]
RouteListener = Callable[[Reader, bool], None]


class ReplicaSet:
    """The standbys a storage reads from, and the choice of server per read
    (module docstring)."""

    def __init__(
        self,
        primary: Pool,
        replicas: Sequence[Replica],
        *,
        max_lag_ms: int,
        on_skip: SkipListener | None = None,
        on_route: RouteListener | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self.primary = primary
        self.replicas = tuple(replicas)
        self.max_lag_s = max_lag_ms / 1000
        self.on_skip = on_skip
        self.on_route = on_route
        self.poll_s = poll_s
        self._wal = _PrimaryWal()
        # Samples are kept long enough to measure past the bound, and a few polls more.
        self._keep_s = max(2 * self.max_lag_s, 20 * poll_s, 1.0)
        self._written: OrderedDict[uuid.UUID, int] = OrderedDict()
        self._turn = itertools.count()
        self._watching: asyncio.Task[None] | None = None

    # --- the writes' positions ---------------------------------------------------

    def written(self, conversation_ids: Iterable[uuid.UUID], lsn: int) -> None:
        """These conversations' last write committed at or before `lsn`."""
        remembered = self._written
        for cid in conversation_ids:
            if remembered.get(cid, -1) < lsn:
                remembered[cid] = lsn
            remembered.move_to_end(cid)
        while len(remembered) > MAX_REMEMBERED:
            remembered.popitem(last=False)

    def committed(self, conversation_id: uuid.UUID) -> None:
        """A write of this task committed: the caller's `Consistency` hears
        its position (the token it may hand on)."""
        consistency = _consistency.get()
        lsn = self._written.get(conversation_id)
        if consistency is not None and lsn is not None:
            consistency.written = max(consistency.written or 0, lsn)

    def last_write(self, conversation_id: uuid.UUID) -> int | None:
        return self._written.get(conversation_id)

    # --- choosing the server ----------------------------------------------------

    def _choose(self, reader: Reader, conversation_id: uuid.UUID | None) -> Replica | None:
        consistency = _consistency.get()
        needed = consistency.after if consistency is not None else None
        if reader == AGENT:
            last = None if conversation_id is None else self._written.get(conversation_id)
            if last is None and needed is None:
                return None  # nothing says how fresh: only the primary is sure
            needed = max(last or 0, needed or 0)
        usable = []
        for replica in self.replicas:
            reason = replica.unusable(self.max_lag_s)
            if reason == "lagging" and reader == AGENT and replica.lag_s is not None:
                reason = None  # an agent's read needs its write, not a bound
            if reason is not None:
                self._skip(replica, reason)
            elif needed is None or replica.replayed >= needed:
                usable.append(replica)
        if not usable:
            return None
        return usable[next(self._turn) % len(usable)]

    async def read(
        self,
        reader: Reader,
        conversation_id: uuid.UUID | None,
        read: Callable[[Pool], Awaitable[T]],
    ) -> T:
        """`read(pool)` on the server chosen for `reader` (module docstring);
        again on the primary if it fails on a standby."""
        replica = self._choose(reader, conversation_id)
        if replica is not None:
            try:
                result = await read(replica.pool)
            except (psycopg.Error, ConversationNotFound) as error:
                # A standby's "not found" may only be a write it has not
                # replayed yet; any other failure is the standby's too.
                if _connection_lost(error):
                    replica.answered = False
                if not isinstance(error, ConversationNotFound):
                    self._skip(replica, "down" if not replica.answered else "failed")
            else:
                self._routed(reader, True)
                return result
        self._routed(reader, False)
        return await read(self.primary)

    async def caught_up(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        """Return once every standby analysts may read has replayed what the
        primary has written by now, or after at most `timeout` seconds: a
        tail woken by the primary's signal then finds the new events on the
        standby it reads (`FeedReads.wait_for_feed`)."""
        deadline = time.monotonic() + timeout
        answer = await _answer(self.primary, PRIMARY_LSN)
        if answer is None:
            return  # the tail's next read says what the primary's trouble is
        target = answer[0]
        while time.monotonic() < deadline:
            readable = [r for r in self.replicas if r.unusable(self.max_lag_s) is None]
            if all(r.replayed >= target for r in readable):
                return
            await asyncio.sleep(min(self.poll_s / 2, max(0.0, deadline - time.monotonic())))

    def _routed(self, reader: Reader, replica: bool) -> None:
        if self.on_route is not None:
            self.on_route(reader, replica)

    def _skip(self, replica: Replica, reason: SkipReason) -> None:
        if replica.skipped != reason:
            replica.skipped = reason
            _log.warning(
                "replica %s skipped (%s): reads go to the primary or another replica",
                replica.name,
                reason,
            )
        if self.on_skip is not None:
            self.on_skip(replica.name, reason)

    # --- watching the standbys ----------------------------------------------------

    async def start(self) -> None:
        """Look at every standby once (bounded by `POLL_TIMEOUT_S`), then
        keep looking, every `poll_s`, until `close`."""
        await self.poll()
        self._watching = asyncio.get_running_loop().create_task(
            self._watch(), name="convo-store: replica lag"
        )

    async def close(self) -> None:
        watching, self._watching = self._watching, None
        if watching is not None:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
        for replica in self.replicas:
            await replica.pool.close(timeout=1.0)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            await self.poll()

    async def poll(self) -> None:
        """Ask the primary where its WAL ends and each standby how far it
        has replayed, all at once. The times compared are when the
        questions were sent, not when the answers were read: a process
        whose event loop is busy (an export decoding its pages) would
        otherwise count its own delay as the standbys' lag."""
        asked = time.monotonic()
        primary, *standbys = await asyncio.gather(
            _answer(self.primary, PRIMARY_LSN),
            *(_answer(replica.pool, STANDBY_STATE) for replica in self.replicas),
        )
        if primary is not None:  # the primary's own troubles show on its reads
            self._wal.add(asked, primary[0], self._keep_s)
        for replica, state in zip(self.replicas, standbys, strict=True):
            self._look_at(replica, state, asked)

    def _look_at(self, replica: Replica, state: tuple[Any, ...] | None, asked: float) -> None:
        if state is None:
            replica.answered = False
            replica.lag_s = None
            return
        replica.answered = True
        replica.standby, replayed = bool(state[0]), state[1]
        # As answered, not the most ever seen: a standby restarted between
        # two looks may start again from an earlier position.
        replica.replayed = 0 if replayed is None else int(replayed)
        replica.lag_s = self._wal.lag(replica.replayed, asked, self._keep_s)
        if replica.skipped is not None and replica.unusable(self.max_lag_s) is None:
            replica.skipped = None
            _log.info("replica %s is used again (%.3f s behind)", replica.name, replica.lag_s)

    def status(self) -> list[dict[str, Any]]:
        """Each standby as last seen: name, answered, standby, lag (seconds), replayed LSN."""
        return [
            {
                "name": r.name,
                "answered": r.answered,
                "standby": r.standby,
                "lag_s": r.lag_s,
                "replayed": format_lsn(r.replayed),
            }
            for r in self.replicas
        ]


async def open_replica_set(
    primary: Pool,
    urls: Sequence[str],
    *,
    options: str,
    max_size: int,
    max_lag_ms: int,
    on_skip: SkipListener | None = None,
    on_route: RouteListener | None = None,
) -> ReplicaSet:
    """A pool per standby (not waited for: one that is down is used once
    it answers), looked at once. Each pool holds up to `max_size`
    connections; a read waits `REPLICA_POOL_WAIT_S` for one, then goes to
    the primary."""
    replicas: list[Replica] = []
    try:
        for url in urls:
            pool = await open_pool(
                url,
                options=options,
                min_size=1,
                max_size=max_size,
                timeout=REPLICA_POOL_WAIT_S,
                wait=False,
            )
            replicas.append(Replica(name=server_name(url), pool=pool))
        replica_set = ReplicaSet(
            primary, replicas, max_lag_ms=max_lag_ms, on_skip=on_skip, on_route=on_route
        )
        await replica_set.start()
    except BaseException:
        for replica in replicas:
            await replica.pool.close(timeout=1.0)
        raise
    return replica_set


def _connection_lost(error: BaseException) -> bool:
    """Whether the connection failed (no SQLSTATE, class 08, or the server
    shutting down) rather than the statement: the standby counts as down."""
    if not isinstance(error, psycopg.OperationalError):
        return False
    state = error.sqlstate
    return state is None or state.startswith(("08", "57P"))


async def _answer(pool: Pool, statement: str) -> tuple[Any, ...] | None:
    """The statement's one row, or None when the server does not answer
    within `POLL_TIMEOUT_S` (or fails)."""
    try:
        async with asyncio.timeout(POLL_TIMEOUT_S):
            async with pooled(pool) as conn:
                cursor = await conn.execute(statement)
                return await cursor.fetchone()
    except (psycopg.Error, TimeoutError):
        return None
