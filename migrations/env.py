"""Alembic environment: runs migrations on a given connection or URL.

`hosting.migrate` passes a live connection in `config.attributes`; the
`alembic` command line passes a URL (from `-x url=...`, the ini file, or
DATABASE_URL).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from hosting.settings import sqlalchemy_url
from hosting.tables import include_name, metadata

config = context.config
target_metadata = metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        compare_server_default=True,
        include_name=include_name,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("DATABASE_URL")
    )
    if not url:
        raise SystemExit("no database: pass -x url=..., or set DATABASE_URL")
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; run against a database")
run_migrations_online()
