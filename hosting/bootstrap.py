"""Wiring for the application shell: the storage and repositories that the
CLI, the demo and the HTTP app run on, made from `Settings` in one place."""

from __future__ import annotations

from hosting.settings import Settings, limits_from_settings
from store.postgres import PostgresStorage
from store.repository import DEFAULT_TENANT, Repository
from store.repository.port import Storage


async def open_storage(
    url: str, settings: Settings, *, max_size: int = 10, min_size: int = 1
) -> PostgresStorage:
    """A PostgreSQL storage on `url` with the settings' session timeouts and
    append statements in flight, its pool `min_size` to `max_size` connections."""
    return await PostgresStorage.connect(
        url,
        options=settings.connection_options(),
        min_size=min_size,
        max_size=max_size,
        writers=settings.write_statements,
    )


def repository(storage: Storage, settings: Settings, tenant: str = DEFAULT_TENANT) -> Repository:
    """A tenant's repository over `storage`, with the settings' limits."""
    return Repository(storage, tenant=tenant, limits=limits_from_settings(settings))
