"""Adapter tests run on the in-memory repository and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from store.memory import InMemoryRepository
from store.postgres import PostgresStorage
from store.repository import Repository


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.integration),
    ]
)
async def repository(request: pytest.FixtureRequest) -> AsyncIterator[Repository]:
    if request.param == "memory":
        yield InMemoryRepository()
        return
    url: str = request.getfixturevalue("database_url")
    storage = await PostgresStorage.connect(url)
    yield Repository(storage)
    await storage.close()
