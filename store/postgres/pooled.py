"""The storage's pool: how each connection is set up, how one is borrowed,
and the base every concern's operations stand on (`Pooled`).

A connection that raised a driver error is not handed back to the pool.
After an error psycopg's record of what a connection prepared may not match
the server's (a Parse the server skipped inside a failed pipeline), or a
prepared statement may be what failed (a migration changed the types of
its rows: `driver_errors`). Either way its next use of that statement would
fail again, so the connection is closed and the pool opens another.
Database errors are rare (lost races are found before anything is sent), so
this costs little.

Every exception that escapes goes through `driver_errors.translate`: the
store's callers only ever see `store.domain.errors`.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar

import orjson
import psycopg
from psycopg import AsyncConnection
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg_pool import AsyncConnectionPool

from store.postgres.driver_errors import translate
from store.postgres.urls import libpq_url

T = TypeVar("T")

# Whose read it is: an agent's must see the writes it may know of, an
# analyst's may be a moment old (`replicas`).
Reader = Literal["agent", "analyst"]

Row = tuple[Any, ...]
Pool = AsyncConnectionPool[AsyncConnection[Any]]

# Every session starts with these (see docs/operations.md): appends are
# short; a statement or a lock wait that runs long means something is wrong,
# and an idle transaction holds back the global feed for every reader.
DEFAULT_OPTIONS = (
    "-c statement_timeout=30000 -c lock_timeout=5000 -c idle_in_transaction_session_timeout=60000"
)
# And, whatever the caller's options (docs/operations.md, "Several worker
# processes", has what each saved):
# - no JIT compilation: the store's statements are short index reads and
#   writes, and a read whose plan the planner costed high (a branch it
#   would never run included) spent longer compiling expressions than
#   reading;
# - no memoizing of look-ups: a window read member by member looks up each
#   message and event once, so the cache in front of each look-up only
#   costs;
# - times in UTC: every time the store keeps is an instant, so the zone
#   only decides how it is written back, and in UTC it is the same whatever
#   zone the server is configured with. psycopg reads a session in `UTC`
#   with the standard library's `timezone.utc`; in any other zone (even
#   `Etc/UTC`) it converts each value with a `ZoneInfo`.
SESSION_OPTIONS = "-c jit=off -c enable_memoize=off -c TimeZone=UTC"


def json_text(value: Any) -> str:
    """A JSON parameter's text. Non-finite numbers are not JSON: refused
    here rather than stored as null."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


class _JsonLoader(Loader):
    """`json`/`jsonb` values (text format) straight into `orjson.loads`,
    which takes the driver's buffer as it is: no Python call in between,
    as `set_json_loads` has."""

    load = staticmethod(orjson.loads)  # type: ignore[assignment]  # takes str too


class _JsonBinaryLoader(_JsonLoader):
    """`json` in binary format, which is its text: the same."""

    format = Format.BINARY


async def _configure(conn: AsyncConnection[Any]) -> None:
    # JSON from the server is decoded by orjson: a whole window is as many
    # bodies as messages, and the standard library's decoder was the
    # largest part of reading them.
    conn.adapters.register_loader("json", _JsonLoader)
    conn.adapters.register_loader("jsonb", _JsonLoader)
    conn.adapters.register_loader("json", _JsonBinaryLoader)
    # Prepare every statement at its first use rather than its fifth: the
    # statements are a fixed set of shapes, and a pool hands each request
    # the connection used longest ago, so with many connections the default
    # threshold left most of a busy minute's appends parsed and planned anew.
    conn.prepare_threshold = 0


async def open_pool(
    url: str,
    *,
    options: str,
    min_size: int,
    max_size: int,
    timeout: float,  # noqa: ASYNC109 - the pool's wait, not this call's
    wait: bool = True,
) -> Pool:
    """An open pool of connections to `url`, each set up as above, in
    autocommit (a transaction is begun by hand where one is needed).
    `wait=False`: open without waiting for its first connections (a
    standby's: it may be down when the storage opens)."""
    pool: Pool = AsyncConnectionPool(
        libpq_url(url),
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        kwargs={"autocommit": True, "options": f"{options} {SESSION_OPTIONS}"},
        configure=_configure,
        open=False,
    )
    try:
        await pool.open(wait=wait, timeout=timeout)
    except Exception as error:
        await pool.close()
        raise_ours(error, None)
        raise
    return pool


def raise_ours(error: Exception, conversation_id: uuid.UUID | None) -> None:
    """Raise the store's error for `error`, if it has one."""
    ours = translate(error, conversation_id=conversation_id)
    if ours is not None:
        raise ours from error


class _ErrorsTranslated:
    __slots__ = ("_conversation_id",)

    def __init__(self, conversation_id: uuid.UUID | None) -> None:
        self._conversation_id = conversation_id

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(error, Exception):
            raise_ours(error, self._conversation_id)


def errors_translated(conversation_id: uuid.UUID | None = None) -> _ErrorsTranslated:
    """`with errors_translated(cid):` an exception that escapes is the
    store's error for it (`driver_errors.translate`, naming the
    conversation), or, if it has none, as it was."""
    return _ErrorsTranslated(conversation_id)


class _Borrowed:
    """`pooled`'s context manager: the pool's `getconn` and `putconn`, as
    `pool.connection()` does them less its own context manager and the
    connection's (which, for a connection in autocommit that the borrower
    left idle, only takes its lock to commit nothing). A connection left
    in a transaction or mid-statement is the pool's to roll back or
    discard (`putconn`), as before. Two generator-based context managers
    less per borrow: the append's hot path borrows once
    (docs/storage.md, "Where an append's time goes")."""

    __slots__ = ("_conn", "_pool")

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._conn: AsyncConnection[Any] | None = None

    async def __aenter__(self) -> AsyncConnection[Any]:
        self._conn = await self._pool.getconn()
        return self._conn

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        conn = self._conn
        assert conn is not None
        self._conn = None
        try:
            if isinstance(error, psycopg.Error):
                await conn.close()  # the pool opens another
        finally:
            await self._pool.putconn(conn)


def pooled(pool: Pool) -> _Borrowed:
    """`async with pooled(pool) as conn:` a connection of `pool`, closed
    instead of returned after a driver error."""
    return _Borrowed(pool)


@asynccontextmanager
async def by_hand(pool: Pool) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection for a transaction the caller begins and commits by hand
    (`BEGIN` goes out in one sync with what follows it): whatever escapes,
    the transaction does not stay open. After a database error the
    connection is closed instead (the pool replaces it), as above."""
    async with pool.connection() as conn:
        try:
            yield conn
        except BaseException as error:
            if isinstance(error, psycopg.Error):
                await conn.close()
                raise
            if conn.info.transaction_status in (
                psycopg.pq.TransactionStatus.INTRANS,
                psycopg.pq.TransactionStatus.INERROR,
            ):
                # A broken connection: the pool discards it.
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("ROLLBACK")
            raise


class ReadRouter(Protocol):
    """What chooses the server of each read (`replicas.ReplicaSet`)."""

    async def read(
        self,
        reader: Reader,
        conversation_id: uuid.UUID | None,
        read: Callable[[Pool], Awaitable[T]],
    ) -> T: ...

    async def caught_up(self, timeout: float) -> None: ...  # noqa: ASYNC109 - a wait


class Pooled:
    """What the storage's operations share, whatever their concern: the
    pool, and a connection of it outside any conversation with errors
    translated (`storage.PostgresStorage` says how the concerns compose);
    the standbys reads may go to, if any (`replicas`)."""

    pool: Pool
    replicas: ReadRouter | None = None

    async def _routed(
        self,
        reader: Reader,
        conversation_id: uuid.UUID | None,
        read: Callable[[Pool], Awaitable[T]],
    ) -> T:
        """`read(pool)` on the pool of the server that answers this read:
        the primary's, or a standby's (`replicas.ReplicaSet.read`)."""
        if self.replicas is None:
            return await read(self.pool)
        return await self.replicas.read(reader, conversation_id, read)

    async def _analyst_rows(self, statement: str, params: Mapping[str, Any]) -> list[Row]:
        """`_rows` for an analyst's read: on a standby when one is near enough."""

        async def rows(pool: Pool) -> list[Row]:
            async with pooled(pool) as conn:
                cursor = await conn.execute(statement, params)
                return await cursor.fetchall()

        with errors_translated():
            return await self._routed("analyst", None, rows)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        with errors_translated():
            async with pooled(self.pool) as conn:
                yield conn

    async def _rows(self, statement: str, params: Mapping[str, Any]) -> list[Row]:
        async with self._connection() as conn:
            cursor = await conn.execute(statement, params)
            return await cursor.fetchall()
