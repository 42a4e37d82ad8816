"""`store.repository.port.Storage` on PostgreSQL, over psycopg 3 and its pool.

`PostgresStorage` is composed of one class per concern, each in the module
that also holds its SQL (or beside one that does):

- a write under the row lock, its lookups, a fork's reads, a purge:
  `write_session` (its statements: `write_statements`, `append_sql`, `forks`);
- an append in one round trip, written with the others waiting then:
  `optimistic`, `group_commit`;
- rebuilding the views from the log: `rebuild`;
- the reads of one conversation: `reads` (`window_sql`, `history_sql`);
- a tenant's conversations: `listing`;
- the feed, a tenant's feed, what an export needs: `feed`, `feed_signal`;
- search: `search`, `search_indexes`;
- compaction candidates and claims: `candidates`;
- what a tenant holds, for its caps: `usage`;
- the pool, its connections, errors translated: `pooled`, `driver_errors`;
- writers of one conversation kept to a share of the pool: `conversation_gate`;
- which server answers each read, the primary or a streaming standby: `replicas`.

Why mixins rather than a facade that forwards each call to an object per
concern: every operation is written once, where its statements are, with
the signature the port gives it, instead of once there and again as a
forwarding stub here (the port has some fifty operations); the composed
class is what mypy checks against `Storage`. The concerns share nothing
but the pool and the translation of errors (`pooled.Pooled`), and none
calls another's operations. What this module keeps is what ties them
together: opening and closing the pool, and `writing`, which chooses
between the two ways a write goes.

Round trips are the cost to watch: a write is two at most (`write_session`
says which), an append after an append of this process one
(`optimistic`), a read one (`reads`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Generator, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

import psycopg

from store.postgres.candidates import CompactionQueries
from store.postgres.conversation_gate import ConversationGate
from store.postgres.feed import FeedReads
from store.postgres.feed_signal import FeedSignal
from store.postgres.group_commit import WRITERS, GroupCommit
from store.postgres.listing import ConversationListing
from store.postgres.optimistic import OptimisticSession, RememberedHeads
from store.postgres.pooled import DEFAULT_OPTIONS, Pool, by_hand, errors_translated, open_pool
from store.postgres.reads import ConversationReads
from store.postgres.rebuild import Rebuilding
from store.postgres.replicas import (
    COMMIT_LSN,
    ReplicaSet,
    RouteListener,
    SkipListener,
    open_replica_set,
)
from store.postgres.restore import Restoring
from store.postgres.schema_revision import check_schema
from store.postgres.search import MessageSearch
from store.postgres.usage import TenantUsage
from store.postgres.write_session import WriteSession
from store.repository.port import PLAIN_WRITE, StaleHead, WriteOptions

# The session `writing` yields under the lock, by the name tests that hold
# a write open before its commit know it by.
_WriteSession = WriteSession

AUTOVACUUM_OFF = (
    "autovacuum is off on this server: table statistics go stale, and a conversation that"
    " grew by thousands of messages since the last ANALYZE can be planned as if it were"
    " empty (reads and batch operations on it slow down until they time out); turn"
    " autovacuum on, or run ANALYZE after bulk loads (docs/operations.md, 'Statistics')"
)


class PostgresStorage(
    ConversationReads,
    ConversationListing,
    MessageSearch,
    FeedReads,
    CompactionQueries,
    Rebuilding,
    Restoring,
    TenantUsage,
):
    """The storage port on PostgreSQL.

    `async with PostgresStorage.connect(url) as storage:` closes it at the
    end of the block; `storage = await PostgresStorage.connect(url)` leaves
    closing it (`await storage.close()`) to the caller. One left open is
    closed when its event loop shuts down (`_close_at_loop_shutdown`).
    """

    replicas: ReplicaSet | None

    def __init__(
        self, pool: Pool, *, writers: int = WRITERS, replicas: ReplicaSet | None = None
    ) -> None:
        self.pool = pool
        self.replicas = replicas
        self._feed_signal = FeedSignal(pool)
        self._group_commit = GroupCommit(
            pool, writers=writers, on_commit=None if replicas is None else replicas.written
        )
        self._remembered = RememberedHeads()
        self._closing: asyncio.Task[None] | None = None
        self._guard: asyncio.Task[None] | None = None
        # Writers waiting on one conversation's lock take a bounded share of the pool.
        self.gate = ConversationGate()

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        options: str = DEFAULT_OPTIONS,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,
        writers: int = WRITERS,
        check_schema: bool = True,
        replicas: Sequence[str] = (),
        max_replica_lag_ms: int = 1000,
        on_replica_skip: SkipListener | None = None,
        on_read_routed: RouteListener | None = None,
    ) -> Connecting:
        """A storage with its own connection pool on the database at `url`:
        `await` it, or `async with` it to have it closed at the block's end.

        `timeout` is how long a caller waits for a free connection before
        `StorageUnavailable`; `max_size` bounds the connections it opens;
        `writers` how many statements of optimistic appends are in flight
        at once (`store.postgres.group_commit`). With `check_schema` (the
        default), a database whose schema is missing or older than this
        code is refused at once with `SchemaNotMigrated` (one query).

        `replicas`: URLs of streaming standbys of that database. Analysts'
        reads go to one at most `max_replica_lag_ms` behind, agents' reads
        to one that has replayed their conversation's last write; a standby
        that cannot is skipped (`on_replica_skip(name, reason)`) and the
        primary answers (`store.postgres.replicas`). `on_read_routed(reader,
        on_replica)` hears where each read went. A standby that is down
        when the storage opens is used once it answers.
        """

        async def opened() -> PostgresStorage:
            pool = await open_pool(
                url, options=options, min_size=min_size, max_size=max_size, timeout=timeout
            )
            replica_set = None
            try:
                if replicas:
                    replica_set = await open_replica_set(
                        pool,
                        replicas,
                        options=options,
                        max_size=max_size,
                        max_lag_ms=max_replica_lag_ms,
                        on_skip=on_replica_skip,
                        on_route=on_read_routed,
                    )
            except BaseException:
                await pool.close()
                raise
            storage = cls(pool, writers=writers, replicas=replica_set)
            try:
                if check_schema:
                    await check_schema_of(storage)
            except BaseException:
                await storage.close()
                raise
            storage._close_at_loop_shutdown()
            return storage

        return Connecting(opened())

    def _close_at_loop_shutdown(self) -> None:
        """Close this storage when its event loop shuts down, if nobody did.

        `asyncio.run` ends by cancelling every task still running and
        waiting for them. psycopg_pool's workers take a cancellation that
        arrives while they open a connection as a failed attempt and go on
        (the pool is meant to outlive its callers' cancellations), so a
        program that raised before closing its storage could wait for
        them forever. This task is cancelled with them and closes the pool,
        which tells those workers to stop: the program ends at once.
        """
        self._guard = asyncio.get_running_loop().create_task(
            self._wait_for_loop_shutdown(), name="convo-store: close at loop shutdown"
        )

    async def _wait_for_loop_shutdown(self) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self._closing is None:
                # Briefly: nothing is in flight any more that needs waiting for.
                await self._close(pool_timeout=1.0)
            raise

    async def close(self) -> None:
        """Close the pool (idempotent): appends in flight are waited for."""
        guard, self._guard = self._guard, None
        if guard is not None and guard is not asyncio.current_task() and not guard.done():
            guard.cancel()
        await self._close()

    async def _close(self, pool_timeout: float = 5.0) -> None:
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_once(pool_timeout))
        await asyncio.shield(self._closing)

    async def _close_once(self, pool_timeout: float) -> None:
        try:
            await self._group_commit.close()
            await self._feed_signal.close()
            if self.replicas is not None:
                await self.replicas.close()
        finally:
            await self.pool.close(timeout=pool_timeout)

    async def __aenter__(self) -> PostgresStorage:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def ping(self) -> None:
        """One trivial query: does the database answer? (`/ready`)"""
        async with self._connection() as conn:
            await conn.execute("SELECT 1")

    async def server_warnings(self) -> list[str]:
        """What in the server's settings an operator should hear of at
        startup (docs/operations.md, "Statistics")."""
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT current_setting('autovacuum')")
            row = await cursor.fetchone()
        return [AUTOVACUUM_OFF] if row is not None and row[0] == "off" else []

    @asynccontextmanager
    async def writing(
        self, conversation_id: uuid.UUID, tenant: str, options: WriteOptions = PLAIN_WRITE
    ) -> AsyncIterator[WriteSession | OptimisticSession]:
        remembered = self._remembered.take(conversation_id)
        session: WriteSession | OptimisticSession | None = None
        with errors_translated(conversation_id):
            if (
                options.optimistic
                and options.create is None
                and remembered is not None
                and remembered.answers(tenant, options.lookups)
            ):
                # One statement, sent by its write (with whatever other
                # conversations' appends wait then), or nothing at all.
                session = OptimisticSession(self._group_commit, conversation_id, remembered)
                try:
                    yield session
                except BaseException as error:
                    if session.moved:
                        self._remembered.keep_for_retry(conversation_id, remembered)
                    if isinstance(error, psycopg.errors.UniqueViolation):
                        # A new call's id was in use after all: decide
                        # again under the lock, which says so properly.
                        raise StaleHead() from error
                    raise
            else:
                async with self.gate.admitted(conversation_id), by_hand(self.pool) as conn:
                    async with conn.pipeline() as pipeline:
                        session = WriteSession(conn, pipeline, conversation_id)
                        await session.open(tenant, options.create, options.lookups)
                        yield session
                        # Sent with the write's statements: leaving the
                        # pipeline syncs once and raises what failed.
                        await conn.execute("COMMIT")
                        # With replicas, the commit's position, in the same sync.
                        position = None
                        if self.replicas is not None and session.written is not None:
                            position = await conn.execute(COMMIT_LSN)
                    if position is not None:
                        assert self.replicas is not None
                        row = await position.fetchone()
                        assert row is not None
                        self.replicas.written((conversation_id,), row[0])
        assert session is not None
        if session.written is not None:
            self._feed_signal.committed()
            if self.replicas is not None:
                self.replicas.committed(conversation_id)
        self._remembered.after_write(conversation_id, session, remembered)


class Connecting:
    """What `PostgresStorage.connect` returns: awaited, the open storage;
    used with `async with`, the storage, closed when the block ends."""

    __slots__ = ("_opening", "_storage")

    def __init__(self, opening: Any) -> None:
        self._opening = opening
        self._storage: PostgresStorage | None = None

    def __await__(self) -> Generator[Any, None, PostgresStorage]:
        storage: PostgresStorage = yield from self._opening.__await__()
        return storage

    async def __aenter__(self) -> PostgresStorage:
        self._storage = await self._opening
        return self._storage

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._storage is not None:
            await self._storage.close()


async def check_schema_of(storage: PostgresStorage) -> None:
    async with storage._connection() as conn:
        await check_schema(conn)


__all__ = ["AUTOVACUUM_OFF", "DEFAULT_OPTIONS", "Connecting", "PostgresStorage"]
