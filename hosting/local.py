"""One call from Python to a ready store: `local_storage()`.

    from hosting.local import local_storage

    async with local_storage() as storage:
        repo = Repository(storage, tenant="acme")

It does for a script what every `convo` command does before its work: the
database of `DATABASE_URL` (waited for, created when missing and the role
may), or without it the embedded PostgreSQL in `CONVO_DATA_DIR`; migrated
to the latest revision; then a storage with the settings' pool and
timeouts. Leaving the block closes the storage and stops the embedded
server (the last user stops it: `hosting.embedded`).

Starting the server and migrating block for seconds, so they run in a
worker thread: the caller's event loop keeps serving its other tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager

from hosting.bootstrap import open_storage
from hosting.database import Database, open_database
from hosting.migrate import upgrade_database
from hosting.settings import Settings
from store.postgres import PostgresStorage


def _opened(stack: ExitStack, settings: Settings, migrate: bool) -> Database:
    database = stack.enter_context(open_database(settings, create=True))
    if migrate:
        upgrade_database(database.url, settings)
    return database


@asynccontextmanager
async def local_storage(
    settings: Settings | None = None, *, migrate: bool = True
) -> AsyncIterator[PostgresStorage]:
    """A connected storage on the configured database (the embedded server
    when `DATABASE_URL` is unset), migrated first unless `migrate=False`;
    closed, and the embedded server stopped, when the block ends.

    Raises `hosting.database.StartupError` (one line) when the database
    cannot be reached, created or started."""
    settings = Settings.from_env() if settings is None else settings
    with ExitStack() as stack:
        try:
            database = await asyncio.to_thread(_opened, stack, settings, migrate)
        except BaseException:
            await asyncio.to_thread(stack.close)
            raise
        try:
            async with await open_storage(database.url, settings) as storage:
                yield storage
        finally:
            # Stops the embedded server: blocking, so off the loop as well.
            await asyncio.to_thread(stack.close)


__all__ = ["local_storage"]
