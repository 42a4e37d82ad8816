"""Engines, and the database-level tasks that need the driver itself.

Every engine built here starts each connection with our timeouts, and hides
statement parameters (`hide_parameters=True`): a failed statement's
parameters (message content) never reach an exception's text or a log.
Driver errors become ours in `store.postgres.driver_errors`, keyed on the
constraint names we chose in `store.postgres.schema` (a unique violation on the
stream-version constraint is a lost race, not a bug).
"""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy import Engine, create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from hosting.settings import Settings, libpq_url, sqlalchemy_url


def _connect_args(settings: Settings) -> dict[str, Any]:
    return {"options": settings.connection_options()}


def make_async_engine(url: str, settings: Settings, **kwargs: Any) -> AsyncEngine:
    """An engine that never shows statement parameters (there is no opting out)."""
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(
        sqlalchemy_url(url),
        connect_args=_connect_args(settings),
        hide_parameters=True,
        **kwargs,
    )


def make_sync_engine(url: str, settings: Settings, **kwargs: Any) -> Engine:
    """An engine that never shows statement parameters (there is no opting out)."""
    return create_engine(
        sqlalchemy_url(url),
        connect_args=_connect_args(settings),
        hide_parameters=True,
        **kwargs,
    )


def create_database_if_missing(server_url: str, name: str) -> None:
    """CREATE DATABASE `name` on the server at `server_url` unless it exists."""
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists is None:
            conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(server_url: str, name: str) -> None:
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def raw_connection(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A plain psycopg connection (benchmarks' baseline, admin tasks)."""
    return psycopg.connect(libpq_url(url))
