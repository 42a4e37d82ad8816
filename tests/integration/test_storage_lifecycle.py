"""A storage's life: opened with `async with`, refused on a database that was
not migrated, and never holding a program hostage at exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import make_url

from hosting import migrate
from hosting.engines import make_sync_engine
from hosting.settings import Settings, libpq_url
from store import Message, Repository
from store.postgres import SCHEMA_REVISION, PostgresStorage, SchemaNotMigrated

ROOT = Path(__file__).resolve().parents[2]

# A script that opens a storage, sets its pool growing (connections being
# opened when it fails), then raises: asyncio.run must end it at once.
RAISES_MIDWAY = textwrap.dedent(
    """
    import asyncio, sys
    from store.postgres import PostgresStorage

    async def main() -> None:
        storage = await PostgresStorage.connect(sys.argv[1], max_size=10)
        for _ in range(20):
            asyncio.get_running_loop().create_task(storage.ping())
        await asyncio.sleep(0.01)
        raise RuntimeError("the script fails mid-way")

    asyncio.run(main())
    """
)


async def test_async_with_closes_the_storage(database_url: str) -> None:
    async with PostgresStorage.connect(database_url) as storage:
        repository = Repository(storage, tenant="acme")
        await repository.create_conversation("user-123")
        await repository.append_messages("user-123", [Message(role="user", content="hi")])
    assert storage.pool.closed
    # Awaited, then used as a context manager itself: the same.
    async with await PostgresStorage.connect(database_url) as again:
        assert len(await Repository(again, tenant="acme").read_messages("user-123")) == 1
    assert again.pool.closed


async def test_closing_twice_is_harmless(database_url: str) -> None:
    storage = await PostgresStorage.connect(database_url)
    await storage.close()
    await storage.close()


@pytest.mark.slow
def test_a_script_that_raises_with_a_storage_open_exits_at_once(database_url: str) -> None:
    # psycopg_pool's workers went on after asyncio.run cancelled them while
    # they opened a connection: most runs of this script never ended.
    for _ in range(5):
        done = subprocess.run(
            [sys.executable, "-c", RAISES_MIDWAY, libpq_url(database_url)],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.rstrip().endswith("RuntimeError: the script fails mid-way")


async def test_a_database_never_migrated_is_refused_by_name(empty_database_url: str) -> None:
    name = make_url(empty_database_url).database  # the embedded server's URL has a ?host=
    with pytest.raises(SchemaNotMigrated) as refused:
        await PostgresStorage.connect(empty_database_url)
    message = str(refused.value)
    assert f'the database "{name}"' in message
    assert "has no convo-store schema" in message
    assert "`convo migrate`" in message
    assert refused.value.found is None


async def test_a_database_at_an_older_revision_is_refused(
    empty_database_url: str, settings: Settings
) -> None:
    engine = make_sync_engine(empty_database_url, settings)
    try:
        migrate.upgrade(engine, "0015_event_type_enum")
    finally:
        engine.dispose()
    with pytest.raises(SchemaNotMigrated) as refused:
        await PostgresStorage.connect(empty_database_url)
    message = str(refused.value)
    assert "is at schema revision 0015_event_type_enum" in message
    assert f"older than this code's {SCHEMA_REVISION}" in message
    assert "`convo migrate`" in message
    # Asked not to check, it opens (a migration tool's own use).
    storage = await PostgresStorage.connect(empty_database_url, check_schema=False)
    await storage.close()


def test_the_store_expects_the_newest_migration() -> None:
    assert migrate.heads() == [SCHEMA_REVISION], (
        "a new migration: set store.postgres.schema_revision.SCHEMA_REVISION to it"
    )
