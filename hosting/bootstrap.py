"""Wiring for the application shell: the storage and repositories that the
CLI, the demo and the HTTP app run on, made from `Settings` in one place."""

from __future__ import annotations

from hosting.keys import KeyLookup
from hosting.settings import Settings, limits_from_settings
from store.postgres import PostgresStorage
from store.postgres.replicas import RouteListener, SkipListener
from store.repository import DEFAULT_TENANT, Repository
from store.repository.port import Storage


async def open_storage(
    url: str,
    settings: Settings,
    *,
    max_size: int | None = None,
    min_size: int = 1,
    on_replica_skip: SkipListener | None = None,
    on_read_routed: RouteListener | None = None,
) -> PostgresStorage:
    """A PostgreSQL storage on `url` with the settings' session timeouts,
    append statements in flight and pool: `min_size` to `max_size` connections
    (default `CONVO_POOL_SIZE`), a free one waited for `CONVO_POOL_WAIT_S`;
    reads on the standbys of `CONVO_REPLICA_URLS` (each its own pool of that
    size) within `CONVO_REPLICA_MAX_LAG_MS`, the listeners told of each
    skipped standby and each read's server (`store.postgres.replicas`)."""
    size = settings.pool_size if max_size is None else max_size
    return await PostgresStorage.connect(
        url,
        options=settings.connection_options(),
        min_size=min(min_size, size),
        max_size=size,
        timeout=settings.pool_wait_s,
        writers=settings.write_statements,
        replicas=settings.replica_urls,
        max_replica_lag_ms=settings.replica_max_lag_ms,
        on_replica_skip=on_replica_skip,
        on_read_routed=on_read_routed,
    )


async def open_keys(url: str, settings: Settings) -> KeyLookup:
    """API keys on `url`, live ones remembered for `CONVO_KEY_CACHE_S`."""
    return await KeyLookup.connect(
        url, options=settings.connection_options(), cache_s=settings.key_cache_s
    )


def repository(storage: Storage, settings: Settings, tenant: str = DEFAULT_TENANT) -> Repository:
    """A tenant's repository over `storage`, with the settings' limits."""
    return Repository(storage, tenant=tenant, limits=limits_from_settings(settings))
