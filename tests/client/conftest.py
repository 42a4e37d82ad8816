"""The client against the app: in process (httpx's ASGI transport) on each
backend, the in-memory storage and PostgreSQL (a fresh database per test),
with a key of the default tenant, so a local `Repository` over the same
storage sees what the client wrote."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from hosting.settings import Settings
from store.client import AsyncConvoClient, RetryPolicy
from store.memory import MemoryStorage
from store.postgres import PostgresStorage
from store.repository import Repository
from store.repository.port import Storage
from tests.client.serving import asgi_client


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
