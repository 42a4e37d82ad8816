"""Revocation reaches open streams (api.revocation): a live tail or an
export whose key is revoked (or expires: the look-up stops giving its
tenant) ends within a second, with a last message that is the problem,
and sends nothing written after it."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest_asyncio
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from api.app import create_app
from api.deps import Services
from hosting.keys import KeyLookup, create_key, revoke_key
from hosting.settings import Settings
from store.domain.commands import Limits
from store.domain.errors import StorageUnavailable
from store.memory import MemoryStorage
from store.postgres import PostgresStorage
from tests.api.conftest import BASE_URL, auth
from tests.asgi_stream import AsgiStream

WITHIN_S = 1.0  # the promise
PATIENCE = 30.0  # waiting for something that must come, on a loaded machine
KEY = "cs_revocable"


class Keys:
    """Keys a test can revoke, or make fail to answer."""

    def __init__(self) -> None:
        self.tenants = {KEY: "acme"}
        self.failing = False

    async def tenant_for_key(self, key: str) -> str | None:
        if self.failing:
            raise StorageUnavailable()
        return self.tenants.get(key)


def sse_messages(body: bytes) -> list[dict[str, str]]:
    found = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields and not block.startswith(":"):
            found.append(fields)
    return found


@pytest_asyncio.fixture
async def memory_app() -> tuple[FastAPI, Keys, httpx.AsyncClient]:
    keys = Keys()
    services = Services(
        storage=MemoryStorage(), tenant_for_key=keys.tenant_for_key, limits=Limits()
    )
    app = create_app(Settings(), services=services)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL, headers=auth(KEY)
    )
    return app, keys, client


async def _append(client: httpx.AsyncClient, cid: str, text: str) -> None:
    response = await client.post(
        f"/conversations/{cid}/messages", json={"messages": [{"role": "user", "content": text}]}
    )
    assert response.status_code in (200, 201), response.text


async def test_a_revoked_keys_tail_ends_within_a_second_with_the_problem(
    memory_app: tuple[FastAPI, Keys, httpx.AsyncClient],
) -> None:
    app, keys, client = memory_app
    cid = (await client.post("/conversations", json={"id": "c1"})).json()["id"]
    async with AsgiStream(app, "/events/stream", KEY, "after=0-0&heartbeat=0.05") as stream:
        await stream.until(lambda body: b"conversation_started" in body)
        await _append(client, cid, "before")
        await stream.until(lambda body: b"before" in body)
        revoked_at = time.perf_counter()
        del keys.tenants[KEY]
        await stream.ended(timeout=PATIENCE)
        took = stream.ended_at - revoked_at
        keys.tenants[KEY] = "acme"  # to write once more: never sent on the ended stream
        await _append(client, cid, "after")
    assert took < WITHIN_S, f"the stream ended {took:.2f} s after the revocation"
    assert stream.status == 200
    last = sse_messages(stream.body)[-1]
    assert last["event"] == "error"
    problem = json.loads(last["data"])
    assert problem["type"] == "Unauthorized"
    assert problem["status"] == 401
    assert "revoked" in problem["detail"]
    assert b"after" not in stream.body


async def test_a_revoked_keys_export_ends_with_an_error_line(
    memory_app: tuple[FastAPI, Keys, httpx.AsyncClient],
) -> None:
    app, keys, client = memory_app
    cid = (await client.post("/conversations", json={"id": "long"})).json()["id"]
    for start in range(0, 2500, 500):
        messages = [{"role": "user", "content": f"m{i}"} for i in range(start, start + 500)]
        response = await client.post(f"/conversations/{cid}/messages", json={"messages": messages})
        assert response.status_code in (200, 201), response.text
    async with AsgiStream(app, f"/conversations/{cid}/export", KEY) as stream:
        await stream.until(lambda body: body.count(b"\n") >= 1000)
        stream.reading.clear()  # a slow client: the export waits on it
        await asyncio.sleep(0.05)
        del keys.tenants[KEY]
        await asyncio.sleep(0.5)
        stream.reading.set()
        await stream.ended(timeout=PATIENCE)
    lines = [json.loads(line) for line in stream.body.splitlines()]
    assert lines[-1]["type"] == "error"
    assert lines[-1]["problem"]["type"] == "Unauthorized"
    assert len(lines) - 1 < 2500, "the whole export went out after the revocation"


async def test_a_valid_keys_stream_goes_on_and_a_failing_look_up_ends_nothing(
    memory_app: tuple[FastAPI, Keys, httpx.AsyncClient],
) -> None:
    app, keys, _ = memory_app
    async with AsgiStream(app, "/events/stream", KEY, "heartbeat=0.05") as stream:
        await stream.until(lambda body: b": connected" in body)
        keys.failing = True  # the key's database is down for a while
        await asyncio.sleep(1.0)
        assert stream.task is not None
        assert not stream.task.done()
        keys.failing = False
        heartbeats = stream.body.count(b": heartbeat")
        await stream.until(lambda body: body.count(b": heartbeat") > heartbeats + 2)
        assert b"event: error" not in stream.body


async def test_a_key_revoked_with_revoke_key_ends_its_tail_on_postgres(
    database_url: str, settings: Settings, engine: AsyncEngine
) -> None:
    storage = await PostgresStorage.connect(database_url, options=settings.connection_options())
    keys = await KeyLookup.connect(database_url, options=settings.connection_options())
    app = create_app(
        settings,
        services=Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
    )
    key_id, key = await create_key(engine, "acme", "streams")
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(
            transport=transport, base_url=BASE_URL, headers=auth(key)
        ) as client:
            cid = (await client.post("/conversations", json={"id": "c1"})).json()["id"]
            async with AsgiStream(app, "/events/stream", key, "heartbeat=0.1") as stream:
                await stream.until(lambda body: b": connected" in body)
                await _append(client, cid, "before")
                await stream.until(lambda body: b"before" in body)
                revoked_at = time.perf_counter()
                assert await revoke_key(engine, key_id)
                await stream.ended(timeout=PATIENCE)
            took = stream.ended_at - revoked_at
            assert (await client.get("/conversations")).status_code == 401
        assert took < WITHIN_S, f"the stream ended {took:.2f} s after the revocation"
        assert json.loads(sse_messages(stream.body)[-1]["data"])["type"] == "Unauthorized"
    finally:
        await storage.close()
        await keys.close()


async def test_an_expiring_keys_tail_ends_within_a_second_of_its_expiry_on_postgres(
    database_url: str, settings: Settings, engine: AsyncEngine
) -> None:
    """Expiry is a revocation nobody sends: the look-up remembers a key no
    longer than it has left, so a stream of it ends as a revoked one does."""
    storage = await PostgresStorage.connect(database_url, options=settings.connection_options())
    keys = await KeyLookup.connect(database_url, options=settings.connection_options())
    app = create_app(
        settings,
        services=Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
    )
    expires_at = datetime.now(UTC) + timedelta(seconds=2)
    _, key = await create_key(engine, "acme", "short-lived", expires_at=expires_at)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(
            transport=transport, base_url=BASE_URL, headers=auth(key)
        ) as client:
            assert (await client.post("/conversations", json={"id": "c1"})).status_code == 201
            async with AsgiStream(app, "/events/stream", key, "heartbeat=0.1") as stream:
                await stream.until(lambda body: b": connected" in body)
                await stream.ended(timeout=PATIENCE + 2)
            ended_at = datetime.now(UTC) - timedelta(seconds=time.perf_counter() - stream.ended_at)
            assert (await client.get("/conversations")).status_code == 401
        late = (ended_at - expires_at).total_seconds()
        assert late < WITHIN_S, f"the stream ended {late:.2f} s after the key expired"
        assert json.loads(sse_messages(stream.body)[-1]["data"])["type"] == "Unauthorized"
    finally:
        await storage.close()
        await keys.close()
