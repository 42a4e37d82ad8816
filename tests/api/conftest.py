"""The HTTP API, wired by `api.app.create_app` on each backend: every test
here runs against the in-memory storage (fast, no server) and against
PostgreSQL (a fresh database per test), talking to the app in-process
through httpx. Two tenants each have a key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from api.app import create_app
from api.deps import Services
from hosting.engines import make_async_engine
from hosting.keys import KeyLookup, MemoryKeys, create_key
from hosting.settings import Settings
from store.domain.commands import Limits
from store.memory import MemoryStorage
from store.postgres import PostgresStorage

BASE_URL = "http://convo.test"

MakeKey = Callable[[str], Awaitable[str]]


def in_memory_app(settings: Settings) -> tuple[FastAPI, MemoryKeys]:
    """The app on a fresh in-memory storage, with keys made in memory
    (read-only ones too), for tests that need no backend of their own."""
    keys = MemoryKeys()
    services = Services(
        storage=MemoryStorage(),
        tenant_for_key=keys.tenant_for_key,
        grant_for_key=keys.grant_for_key,
        limits=Limits(),
    )
    return create_app(settings, services=services), keys


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest_asyncio.fixture
async def wiring(
    backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Services, MakeKey]]:
    """The app's services on the backend under test, and a way to make keys."""
    if backend == "memory":
        memory = MemoryKeys()

        async def memory_key(tenant: str) -> str:
            return memory.create(tenant, "tests")

        yield (
            Services(
                storage=MemoryStorage(), tenant_for_key=memory.tenant_for_key, limits=Limits()
            ),
            memory_key,
        )
        return
    # Asked for lazily (a memory run needs no server); async fixtures cannot
    # be, so the engine and the key look-ups are made here.
    database_url: str = request.getfixturevalue("database_url")
    settings: Settings = request.getfixturevalue("settings")
    engine = make_async_engine(database_url, settings, pool_size=2, max_overflow=2)
    storage = await PostgresStorage.connect(database_url, options=settings.connection_options())
    keys = await KeyLookup.connect(database_url, options=settings.connection_options())

    async def postgres_key(tenant: str) -> str:
        _, plaintext = await create_key(engine, tenant, "tests")
        return plaintext

    try:
        yield (
            Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
            postgres_key,
        )
    finally:
        await storage.close()
        await keys.close()
        await engine.dispose()


@pytest.fixture
def services(wiring: tuple[Services, MakeKey]) -> Services:
    return wiring[0]


@pytest.fixture
def make_key(wiring: tuple[Services, MakeKey]) -> MakeKey:
    return wiring[1]


@pytest.fixture
def app(settings: Settings, services: Services) -> FastAPI:
    return create_app(settings, services=services)


@pytest_asyncio.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        yield client


@pytest_asyncio.fixture
async def key(make_key: MakeKey) -> str:
    """A key of tenant `acme`."""
    return await make_key("acme")


@pytest_asyncio.fixture
async def other_key(make_key: MakeKey) -> str:
    """A key of tenant `globex`."""
    return await make_key("globex")


@pytest_asyncio.fixture
async def acme(client: httpx.AsyncClient, key: str) -> httpx.AsyncClient:
    """The client, sending acme's key on every request."""
    client.headers.update(auth(key))
    return client


async def new_conversation(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/conversations", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def run_batch_operation(
    client: httpx.AsyncClient, cid: str, **operation: Any
) -> httpx.Response:
    """`POST /conversations/{cid}/batches` with `operation` as the body."""
    return await client.post(f"/conversations/{cid}/batches", json=operation)


async def summarise(
    client: httpx.AsyncClient, cid: str, boundary_seq: int, summary: str
) -> httpx.Response:
    """A compaction by hand: a new batch from `boundary_seq` on, led by a
    user message `summary`."""
    return await run_batch_operation(
        client,
        cid,
        operation="start_batch",
        boundary_seq=boundary_seq,
        summary={"role": "user", "content": summary},
    )


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


def assert_refused(response: httpx.Response, problem: str) -> None:
    """A 422 whose detail names `problem` (a field, or what was wrong)."""
    assert response.status_code == 422, response.text
    assert problem in response.json()["detail"]


def brief(response: httpx.Response) -> dict[str, str]:
    """An error response's problem type and detail, after checking that it
    is RFC 9457 problem details answered with its own status."""
    assert response.headers["content-type"] == "application/problem+json", response.text
    body = response.json()
    assert body["status"] == response.status_code
    assert body["title"]
    assert body["instance"] == response.headers["X-Request-ID"]
    return {"type": body["type"], "detail": body["detail"]}
