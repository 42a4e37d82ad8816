"""Replicas that start together migrate one at a time (store.migrate's
advisory lock): none of them crashes on the others' CREATE TABLEs."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import inspect, text

from store import migrate
from store.db import make_sync_engine
from store.settings import Settings
from store.tables import metadata

REPLICAS = 3


def _migrate_together(url: str, settings: Settings) -> list[BaseException | None]:
    start = threading.Barrier(REPLICAS)

    def replica() -> BaseException | None:
        engine = make_sync_engine(url, settings)
        try:
            with engine.connect() as conn:  # connected before the race starts
                conn.execute(text("SELECT 1"))
            start.wait()
            migrate.upgrade(engine)
            return None
        except Exception as error:
            return error
        finally:
            engine.dispose()

    with ThreadPoolExecutor(REPLICAS) as pool:
        return list(pool.map(lambda _: replica(), range(REPLICAS)))


def test_three_replicas_migrating_a_fresh_database_all_succeed(
    empty_database_url: str, settings: Settings
) -> None:
    assert _migrate_together(empty_database_url, settings) == [None] * REPLICAS
    engine = make_sync_engine(empty_database_url, settings)
    try:
        assert set(metadata.tables) <= set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            versions = conn.execute(text("SELECT version_num FROM alembic_version")).all()
        assert [v for (v,) in versions] == migrate.heads()
    finally:
        engine.dispose()


def test_a_migration_waits_no_longer_than_it_is_told(
    empty_database_url: str, settings: Settings
) -> None:
    engine = make_sync_engine(empty_database_url, settings)
    try:
        with engine.begin() as holder:
            holder.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": migrate.MIGRATION_LOCK_KEY})
            with pytest.raises(migrate.MigrationLockTimeout, match="another process"):
                migrate.upgrade(engine, lock_wait_s=0.2)
    finally:
        engine.dispose()
