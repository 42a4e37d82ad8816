"""Connection lost after commit: an append is committed, and its answer is
lost on the way back — between the service and the client, or between the
database and the service (a loopback proxy cuts the connection right
there: tests/reliability/proxy.py). The client retries with the same
Idempotency-Key, or the same client message ids: nothing is stored twice,
and the retry is answered with what the first attempt stored."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from sqlalchemy import make_url

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.reliability.proxy import CuttingProxy

# What the server sends when a transaction committed: CommandComplete, tag COMMIT.
COMMIT_COMPLETE = b"C\x00\x00\x00\x0bCOMMIT\x00"
TURN = [
    {"role": "user", "content": "list the files", "client_message_id": "m1"},
    {"role": "assistant", "content": "a.txt", "client_message_id": "m2"},
]


class Served:
    """The app under uvicorn on a loopback port, until `stop`."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
        self.sock.close()


@pytest_asyncio.fixture
async def wired(database_url: str, settings: Settings) -> AsyncIterator[dict[str, Any]]:
    """The service over PostgreSQL reached through a proxy, served behind
    another proxy: {client_proxy, database_proxy, base_url, key, storage}."""
    url = make_url(database_url)
    # The embedded server is reached by its socket folder (`?host=/…`).
    socket_folder = url.query.get("host")
    host = socket_folder if isinstance(socket_folder, str) else url.host or "127.0.0.1"
    async with contextlib.AsyncExitStack() as stack:  # whatever was opened is closed
        database_proxy = CuttingProxy(host, url.port or 5432)
        stack.push_async_callback(database_proxy.close)
        proxied = url.difference_update_query(["host"]).set(
            host="127.0.0.1", port=await database_proxy.start()
        )
        storage = await PostgresStorage.connect(
            proxied.render_as_string(hide_password=False), options=settings.connection_options()
        )
        stack.push_async_callback(storage.close)
        keys = MemoryKeys()
        key = keys.create("acme", "tests")
        app = create_app(
            settings,
            services=Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
        )
        served = Served(app)
        await served.start()
        stack.push_async_callback(served.stop)
        client_proxy = CuttingProxy("127.0.0.1", served.port)
        stack.push_async_callback(client_proxy.close)
        port = await client_proxy.start()
        direct = await PostgresStorage.connect(database_url, options=settings.connection_options())
        stack.push_async_callback(direct.close)
        yield {
            "client_proxy": client_proxy,
            "database_proxy": database_proxy,
            "base_url": f"http://127.0.0.1:{port}",
            "key": key,
            "direct": Repository(direct, tenant="acme"),
        }


async def _stored_once(repository: Repository, cid: str) -> None:
    messages = await repository.read_messages(cid)
    assert [m.client_message_id for m in messages] == ["m1", "m2"]
    assert (await repository.get_conversation(cid)).version == 3


@pytest.mark.parametrize("retry_by", ["idempotency_key", "client_message_ids"])
async def test_an_answer_lost_between_service_and_client_is_replayed(
    wired: dict[str, Any], retry_by: str
) -> None:
    headers = {"Authorization": f"Bearer {wired['key']}"}
    if retry_by == "idempotency_key":
        headers["Idempotency-Key"] = "turn-1"
    proxy: CuttingProxy = wired["client_proxy"]
    async with httpx.AsyncClient(base_url=wired["base_url"], headers=headers) as client:
        cid = (await client.post("/conversations", json={"id": "lost-answer"})).json()["id"]
        path = f"/conversations/{cid}/messages"
        proxy.arm(lambda data: b"HTTP/1.1 " in data)  # the answer's first bytes
        with pytest.raises(httpx.TransportError):
            await client.post(path, json={"messages": TURN})
        assert proxy.cuts == 1
        retried = await client.post(path, json={"messages": TURN})
    assert retried.status_code == 200, retried.text
    body = retried.json()
    assert body["replayed"] is True
    assert [m["seq"] for m in body["messages"]] == [1, 2]
    assert body["version"] == 3
    await _stored_once(wired["direct"], cid)


@pytest.mark.parametrize("retry_by", ["idempotency_key", "client_message_ids"])
async def test_a_commit_whose_answer_is_lost_on_the_way_from_the_database_is_replayed(
    wired: dict[str, Any], retry_by: str
) -> None:
    headers = {"Authorization": f"Bearer {wired['key']}"}
    if retry_by == "idempotency_key":
        headers["Idempotency-Key"] = "turn-1"
    # Created by another process: the service decides the append under the
    # lock, in a transaction that ends with COMMIT.
    cid = str((await wired["direct"].create_conversation("lost-commit")).id)
    proxy: CuttingProxy = wired["database_proxy"]
    async with httpx.AsyncClient(base_url=wired["base_url"], headers=headers) as client:
        path = f"/conversations/{cid}/messages"
        proxy.arm(lambda data: COMMIT_COMPLETE in data)
        lost = await client.post(path, json={"messages": TURN})
        assert proxy.cuts == 1, "the commit's answer never passed the proxy"
        assert lost.status_code == 503, lost.text
        assert lost.json()["type"] == "StorageUnavailable"
        assert lost.headers["Retry-After"]
        retried = await client.post(path, json={"messages": TURN})
    assert retried.status_code == 200, retried.text
    body = retried.json()
    assert body["replayed"] is True
    assert [m["seq"] for m in body["messages"]] == [1, 2]
    await _stored_once(wired["direct"], cid)
