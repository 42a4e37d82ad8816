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
- writers of one conversation kept to a share of the pool: `conversation_gate`.

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

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

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
from store.postgres.search import MessageSearch
from store.postgres.usage import TenantUsage
from store.postgres.write_session import WriteSession
from store.repository.port import NO_LOOKUPS, Lookups, StaleHead

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
    TenantUsage,
):
    """The storage port on PostgreSQL. Open it with `connect`, close it with `close`."""

    def __init__(self, pool: Pool, *, writers: int = WRITERS) -> None:
        self.pool = pool
        self._feed_signal = FeedSignal(pool)
        self._group_commit = GroupCommit(pool, writers=writers)
        self._remembered = RememberedHeads()
        # Writers waiting on one conversation's lock take a bounded share of the pool.
        self.gate = ConversationGate()

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        options: str = DEFAULT_OPTIONS,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,  # noqa: ASYNC109 - the pool's wait, not this call's
        writers: int = WRITERS,
    ) -> PostgresStorage:
        """A storage with its own connection pool on the database at `url`.

        `timeout` is how long a caller waits for a free connection before
        `StorageUnavailable`; `max_size` bounds the connections it opens;
        `writers` how many statements of optimistic appends are in flight
        at once (`store.postgres.group_commit`).
        """
        pool = await open_pool(
            url, options=options, min_size=min_size, max_size=max_size, timeout=timeout
        )
        return cls(pool, writers=writers)

    async def close(self) -> None:
        await self._group_commit.close()
        await self._feed_signal.close()
        await self.pool.close()

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
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        *,
        create: str | None = None,
        lookups: Lookups = NO_LOOKUPS,
        optimistic: bool = False,
    ) -> AsyncIterator[WriteSession | OptimisticSession]:
        remembered = self._remembered.take(conversation_id)
        session: WriteSession | OptimisticSession | None = None
        with errors_translated(conversation_id):
            if (
                optimistic
                and create is None
                and remembered is not None
                and remembered.answers(tenant, lookups)
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
                async with (
                    self.gate.admitted(conversation_id),
                    by_hand(self.pool) as conn,
                    conn.pipeline() as pipeline,
                ):
                    session = WriteSession(conn, pipeline, conversation_id)
                    await session.open(tenant, create, lookups)
                    yield session
                    # Sent with the write's statements: leaving the
                    # pipeline syncs once and raises what failed.
                    await conn.execute("COMMIT")
        assert session is not None
        if session.written is not None:
            self._feed_signal.committed()
        self._remembered.after_write(conversation_id, session, remembered)


__all__ = ["AUTOVACUUM_OFF", "DEFAULT_OPTIONS", "PostgresStorage"]
