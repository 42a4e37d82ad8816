"""Adapter tests run on the in-memory repository, on PostgreSQL, and over
HTTP: `http` gives the adapters the client (`store.client.AsyncConvoClient`)
of the API serving a PostgreSQL storage in process, the one constructor
argument an agent in another process would change."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hosting.settings import Settings
from store.memory import InMemoryRepository
from store.postgres import PostgresStorage
from store.repository import ConversationRepository, Repository


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.integration),
        pytest.param("http", id="http", marks=pytest.mark.integration),
    ]
)
async def repository(request: pytest.FixtureRequest) -> AsyncIterator[ConversationRepository]:
    if request.param == "memory":
        yield InMemoryRepository()
        return
    url: str = request.getfixturevalue("database_url")
    if request.param == "postgres":
        storage = await PostgresStorage.connect(url)
        yield Repository(storage)
        await storage.close()
        return
    # The app needs the `server` extra (the ADK's own virtualenv has it
    # too: Makefile, .venv-adk); without it the http runs skip.
    serving = pytest.importorskip("tests.client.serving", exc_type=ImportError)
    settings: Settings = request.getfixturevalue("settings")
    storage = await PostgresStorage.connect(url)
    async with serving.asgi_client(storage, settings) as client:
        yield client
    await storage.close()
