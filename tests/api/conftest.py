"""The HTTP API against a fresh database per test: the app gets the test's
engine injected (no lifespan to run), httpx talks to it in-process, and two
tenants each have a key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from api.app import create_app
from store.api_keys import create_key
from store.settings import Settings

BASE_URL = "http://convo.test"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def app(database_url: str, settings: Settings, engine: AsyncEngine) -> FastAPI:
    return create_app(database_url, settings, engine=engine)


@pytest_asyncio.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        yield client


@pytest_asyncio.fixture
async def key(engine: AsyncEngine) -> str:
    """A key of tenant `acme`."""
    _, plaintext = await create_key(engine, "acme", "tests")
    return plaintext


@pytest_asyncio.fixture
async def other_key(engine: AsyncEngine) -> str:
    """A key of tenant `globex`."""
    _, plaintext = await create_key(engine, "globex", "tests")
    return plaintext


@pytest_asyncio.fixture
async def acme(client: httpx.AsyncClient, key: str) -> httpx.AsyncClient:
    """The client, sending acme's key on every request."""
    client.headers.update(auth(key))
    return client


async def new_conversation(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


TOOL_TURN: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "list the files"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_1", "name": "ls", "arguments": {"path": "."}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"},
    {"role": "assistant", "content": "a.txt and b.txt"},
]
