"""A connection from the pool that is not handed back after a driver error.

After an error psycopg's record of what a connection prepared may not match
the server's (a Parse the server skipped inside a failed pipeline), or a
prepared statement may be what failed (a migration changed the types of
its rows: `driver_errors`). Either way its next use of that statement would
fail again, so the connection is closed and the pool opens another.
Database errors are rare (lost races are found before anything is sent), so
this costs little.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool


@asynccontextmanager
async def pooled(
    pool: AsyncConnectionPool[AsyncConnection[Any]],
) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection of `pool`, closed instead of returned after a driver error."""
    async with pool.connection() as conn:
        try:
            yield conn
        except psycopg.Error:
            await conn.close()
            raise
