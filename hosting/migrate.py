"""Running alembic from code: `upgrade`, `downgrade`, `current`.

Replicas that start together all migrate (`convo serve` migrates first), so
`upgrade` and `downgrade` run under a PostgreSQL advisory lock, taken in
the migration's own transaction. Without it, three replicas starting on an
empty database each see no `alembic_version` and each run `CREATE TABLE`:
all but one fail on a `UniqueViolation` in the catalog (`pg_type`) or on
`alembic_version`'s key, and crash. With it, the first one migrates, the
others wait for its commit, then find the schema at head and do nothing.

The lock is transaction-scoped (`pg_try_advisory_xact_lock`), so a replica
that dies mid-migration releases it with its connection. The wait polls
instead of blocking in `pg_advisory_xact_lock`, because every connection's
`lock_timeout` (5 s by default) would cut a blocking wait short while a
long migration runs; `MIGRATION_LOCK_WAIT_S` bounds it instead.
"""

from __future__ import annotations

import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

import migrations
from hosting.engines import make_sync_engine
from hosting.settings import Settings

SCRIPT_LOCATION = Path(migrations.__file__).parent

# Any fixed bigint will do, as long as nothing else on the server uses it:
# the bytes of "convomig".
MIGRATION_LOCK_KEY = int.from_bytes(b"convomig", "big") & (2**63 - 1)
MIGRATION_LOCK_WAIT_S = 600.0


class MigrationLockTimeout(RuntimeError):
    """Another process held the migration lock for longer than we waited."""


def alembic_config(engine: Engine | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    if engine is not None:
        config.attributes["engine"] = engine
    return config


def _take_migration_lock(connection: Connection, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    pause = 0.05
    statement = text("SELECT pg_try_advisory_xact_lock(:key)")
    while not connection.execute(statement, {"key": MIGRATION_LOCK_KEY}).scalar_one():
        if time.monotonic() >= deadline:
            raise MigrationLockTimeout(
                f"another process has been migrating this database for over {wait_s:.0f} s"
            )
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def _with_connection(
    engine: Engine, action: str, revision: str, lock_wait_s: float = MIGRATION_LOCK_WAIT_S
) -> None:
    config = alembic_config()
    with engine.begin() as connection:
        _take_migration_lock(connection, lock_wait_s)
        config.attributes["connection"] = connection
        getattr(command, action)(config, revision)


def upgrade(
    engine: Engine, revision: str = "head", *, lock_wait_s: float = MIGRATION_LOCK_WAIT_S
) -> None:
    _with_connection(engine, "upgrade", revision, lock_wait_s)


def upgrade_database(url: str, settings: Settings) -> None:
    """`upgrade` to head of the database at `url`, on an engine of its own."""
    engine = make_sync_engine(url, settings)
    try:
        upgrade(engine)
    finally:
        engine.dispose()


def downgrade(engine: Engine, revision: str, *, lock_wait_s: float = MIGRATION_LOCK_WAIT_S) -> None:
    _with_connection(engine, "downgrade", revision, lock_wait_s)


def heads() -> list[str]:
    return list(ScriptDirectory.from_config(alembic_config()).get_heads())
