"""Engines and the driver boundary.

This is the only module that imports the driver (psycopg). It builds
engines whose every connection starts with our timeouts, and turns driver
errors into ours, keyed on the constraint names we chose in
`store.schema` (a unique violation on the stream-version constraint is a
lost race, not a bug).
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg.errors
from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from store.settings import Settings, libpq_url, sqlalchemy_url


def _connect_args(settings: Settings) -> dict[str, Any]:
    return {"options": settings.connection_options()}


def make_async_engine(url: str, settings: Settings, **kwargs: Any) -> AsyncEngine:
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    kwargs.setdefault("pool_pre_ping", True)
    return create_async_engine(sqlalchemy_url(url), connect_args=_connect_args(settings), **kwargs)


def make_sync_engine(url: str, settings: Settings, **kwargs: Any) -> Engine:
    return create_engine(sqlalchemy_url(url), connect_args=_connect_args(settings), **kwargs)


def violated_constraint(error: DBAPIError) -> str | None:
    """The name of the unique/check/foreign-key constraint a statement broke, if any."""
    orig = error.orig
    if isinstance(orig, psycopg.errors.IntegrityError):
        diag = getattr(orig, "diag", None)
        name = getattr(diag, "constraint_name", None)
        return str(name) if name else None
    return None


def is_lock_timeout(error: DBAPIError) -> bool:
    return isinstance(error.orig, psycopg.errors.LockNotAvailable)


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
