"""The client against the app: in process (httpx's ASGI transport) on each
backend, the in-memory storage and PostgreSQL (a fresh database per test),
with a key of the default tenant, so a local `Repository` over the same
storage sees what the client wrote."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.client import AsyncConvoClient, RetryPolicy
from store.domain.commands import Limits
from store.memory import MemoryStorage
from store.postgres import PostgresStorage
from store.repository import DEFAULT_TENANT, Repository
from store.repository.port import Storage

BASE_URL = "http://convo.test"


def serving(storage: Storage, settings: Settings) -> tuple[FastAPI, str]:
    """The app serving `storage`, and a key of its default tenant."""
    keys = MemoryKeys()
    key = keys.create(DEFAULT_TENANT, "tests")
    app = create_app(
        settings,
        services=Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
    )
    return app, key


def asgi_client(
    storage: Storage, settings: Settings, *, retry: RetryPolicy | None = None
) -> AsyncConvoClient:
    """A client of the app serving `storage`, in process, as the default tenant."""
    app, key = serving(storage, settings)
    return AsyncConvoClient(
        BASE_URL,
        api_key=key,
        transport=httpx.ASGITransport(app=app),
        retry=retry,
    )


@pytest_asyncio.fixture
async def storage(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[Storage]:
    if backend == "memory":
        yield MemoryStorage()
        return
    url: str = request.getfixturevalue("database_url")
    postgres = await PostgresStorage.connect(url)
    yield postgres
    await postgres.close()


@pytest.fixture
def repository(storage: Storage) -> Repository:
    """The same storage, in process: what the client wrote, as the library reads it."""
    return Repository(storage)


@pytest_asyncio.fixture
async def client(storage: Storage, settings: Settings) -> AsyncIterator[AsyncConvoClient]:
    async with asgi_client(storage, settings, retry=RetryPolicy(attempts=3, backoff=0)) as client:
        yield client
