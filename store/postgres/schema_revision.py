"""Whether a database holds the schema this code was written for.

A storage opened on a database that was never migrated, or was migrated by
an older release, would fail at its first write with an `UndefinedTable` or
a column it does not know, far from the cause. So opening a storage reads
the alembic revision once (one query) and refuses a database whose schema
is missing or older than `SCHEMA_REVISION`, naming the database, what it
found and the command that fixes it.

Revisions are numbered (`0016_…`): a database at a later one was migrated
by a newer release, which keeps the tables this code reads, and is
accepted (replicas of two releases run side by side during a deploy).
`tests/migrations` holds `SCHEMA_REVISION` to the newest migration.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import AsyncConnection

from store.domain.errors import StorageFailure

# The newest migration in `migrations/versions`; a new one moves it.
SCHEMA_REVISION = "0022_carried_bodies"

MIGRATE_COMMAND = "convo migrate"


class SchemaNotMigrated(StorageFailure):
    """The database's schema is missing or older than this code: run
    `convo migrate` (or `hosting.migrate.upgrade`) on it first."""

    def __init__(self, database: str, found: str | None, needed: str = SCHEMA_REVISION) -> None:
        self.database = database
        self.found = found
        self.needed = needed
        if found is None:
            state = "has no convo-store schema (no alembic_version table)"
        else:
            state = f"is at schema revision {found}, older than this code's {needed}"
        super().__init__(
            f"the database {database} {state}: run `{MIGRATE_COMMAND}` with DATABASE_URL"
            " set to it first",
            error_class=type(self).__name__,
        )


def _number(revision: str) -> int:
    head = revision.split("_", 1)[0]
    return int(head) if head.isdigit() else -1


def describe(conn: AsyncConnection[Any]) -> str:
    """The database for a message: its name and server, no password."""
    info = conn.info
    where = info.host if info.host.startswith("/") else f"{info.host}:{info.port}"
    return f'"{info.dbname}" on {where}'


async def check_schema(conn: AsyncConnection[Any]) -> None:
    """Raise `SchemaNotMigrated` unless the database at `conn` is migrated
    to `SCHEMA_REVISION` or later."""
    try:
        cursor = await conn.execute("SELECT version_num FROM alembic_version")
        rows = await cursor.fetchall()
    except psycopg.errors.UndefinedTable:
        raise SchemaNotMigrated(describe(conn), None) from None
    found = [str(row[0]) for row in rows]
    if not found:
        raise SchemaNotMigrated(describe(conn), None)
    if max(_number(revision) for revision in found) < _number(SCHEMA_REVISION):
        raise SchemaNotMigrated(describe(conn), ", ".join(found))
