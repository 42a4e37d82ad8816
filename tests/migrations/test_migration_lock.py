"""Replicas that start together migrate one at a time (hosting.migrate's
advisory lock): none of them crashes on the others' CREATE TABLEs.

The replicas are processes, as they are in production: each connects,
says it is ready, and migrates when the test says go, so the three
upgrades start within a millisecond of each other. (Without the lock two
of the three fail with a UniqueViolation on `pg_type_typname_nsp_index`.)
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import inspect, text

from hosting import migrate
from hosting.engines import make_sync_engine
from hosting.settings import Settings
from hosting.tables import metadata

REPLICAS = 3
REPLICA = """
import sys
from sqlalchemy import text
from hosting import migrate
from hosting.engines import make_sync_engine
from hosting.settings import Settings

engine = make_sync_engine(sys.argv[1], Settings.from_env())
with engine.connect() as conn:
    conn.execute(text("SELECT 1"))
print("ready", flush=True)
sys.stdin.readline()
try:
    migrate.upgrade(engine)
except Exception as error:
    print(type(error).__name__, str(error).splitlines()[0], flush=True)
    sys.exit(1)
print("migrated", flush=True)
"""


def test_three_replicas_migrating_a_fresh_database_all_succeed(
    empty_database_url: str, settings: Settings
) -> None:
    replicas = [
        subprocess.Popen(
            [sys.executable, "-c", REPLICA, empty_database_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(REPLICAS)
    ]
    try:
        for replica in replicas:
            assert replica.stdout is not None
            assert replica.stdout.readline().strip() == "ready"
        for replica in replicas:
            assert replica.stdin is not None
            replica.stdin.write("go\n")
            replica.stdin.flush()
        said = [replica.communicate(timeout=60)[0].strip() for replica in replicas]
    finally:
        for replica in replicas:
            replica.kill()
            replica.wait()
    assert said == ["migrated"] * REPLICAS
    assert [replica.returncode for replica in replicas] == [0] * REPLICAS

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
            lock = text("SELECT pg_advisory_xact_lock(:key)")
            holder.execute(lock, {"key": migrate.MIGRATION_LOCK_KEY})
            with pytest.raises(migrate.MigrationLockTimeout, match="another process"):
                migrate.upgrade(engine, lock_wait_s=0.2)
    finally:
        engine.dispose()
