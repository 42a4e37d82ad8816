"""Read-only keys: refused with 403 `ReadOnlyKey` on every route that
writes, served on every route that reads, and described by `GET /me`.

The write routes are found by walking the OpenAPI document, so a route
added later is held to the rule without anyone listing it here.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine

from api.app import create_app
from api.deps import READING_POSTS, Services
from hosting.keys import READ_ONLY, KeyLookup, MemoryKeys, create_key, list_keys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.memory import MemoryStorage
from tests.api.conftest import BASE_URL, auth, brief, in_memory_app

METHODS = ("get", "put", "post", "patch", "delete")
# A value for each path parameter: the routes' checks run after the key's.
PATH_VALUES = {"conversation_id": "c-1", "agent_id": "main", "slot": "notes", "seq": "1"}
PATH_VALUES |= {"batch": "1", "role": "user"}


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]["operationId"]


def _streams(document: dict[str, Any], path: str) -> bool:
    """A live stream (it never ends by itself): the walk does not read it."""
    answer = document["paths"][path].get("get", {}).get("responses", {}).get("200", {})
    return "text/event-stream" in answer.get("content", {})


def _url(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES[m[1]], path)


def _writes(method: str, operation_id: str) -> bool:
    return method not in ("GET", "HEAD") and operation_id not in READING_POSTS


@pytest_asyncio.fixture
async def memory_app() -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, Any], MemoryKeys]]:
    app, keys = in_memory_app(Settings.from_env())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        yield client, app.openapi(), keys


async def test_a_read_only_key_is_refused_on_every_write_route(
    memory_app: tuple[httpx.AsyncClient, dict[str, Any], MemoryKeys],
) -> None:
    client, document, keys = memory_app
    reader = keys.create("acme", "analyst", scope=READ_ONLY)
    writer = keys.create("acme", "agent")
    # Something to read, so a read route answers from data, not only 404.
    created = await client.post("/conversations", json={"id": "c-1"}, headers=auth(writer))
    assert created.status_code == 201
    operations = list(_operations(document))
    assert len(operations) > 30  # the walk found the API, not an empty document
    refused = []
    for method, path, operation_id in operations:
        if method == "GET" and _streams(document, path):
            continue
        response = await client.request(method, _url(path), json={}, headers=auth(reader))
        if _writes(method, operation_id):
            assert response.status_code == 403, (method, path, response.text)
            problem = brief(response)
            assert problem["type"] == "ReadOnlyKey"
            assert "read-only" in problem["detail"]
            assert path in problem["detail"]
            refused.append(operation_id)
        else:
            assert response.status_code != 403, (method, path, response.text)
    # Writes the issue names, among those refused.
    for operation_id in (
        "appendMessages",
        "createConversation",
        "compactConversation",
        "deleteConversation",
        "forkConversation",
        "pinMessage",
        "updateConversation",
        "runBatchOperation",
        "updateSlot",
        "configureAgent",
        "replaceContent",
        "archiveConversation",
    ):
        assert operation_id in refused
    # Nothing changed.
    read = await client.get("/conversations/c-1", headers=auth(reader))
    assert read.status_code == 200
    assert read.json()["version"] == created.json()["version"]


async def test_the_reading_posts_serve_a_read_only_key(
    memory_app: tuple[httpx.AsyncClient, dict[str, Any], MemoryKeys],
) -> None:
    client, document, keys = memory_app
    operation_ids = {operation_id for _, _, operation_id in _operations(document)}
    assert operation_ids >= READING_POSTS  # every exception names a route that exists
    reader = keys.create("acme", "analyst", scope=READ_ONLY)
    parsed = await client.post(
        "/xml-tools/parse",
        json={
            "text": '<sentra-tools><invoke name="ls"><parameter name="p">.</parameter>'
            "</invoke></sentra-tools>"
        },
        headers=auth(reader),
    )
    assert parsed.status_code == 200, parsed.text
    assert parsed.json()["calls"][0]["name"] == "ls"


async def test_me_describes_the_key(
    memory_app: tuple[httpx.AsyncClient, dict[str, Any], MemoryKeys],
) -> None:
    client, _, keys = memory_app
    until = datetime.now(UTC) + timedelta(days=1)
    reader = keys.create("acme", "analyst", scope=READ_ONLY, expires_at=until)
    writer = keys.create("globex", "agent")
    me = (await client.get("/me", headers=auth(reader))).json()
    assert me == {
        "tenant": "acme",
        "scope": "read_only",
        "read_only": True,
        "expires_at": until.isoformat().replace("+00:00", "Z"),
    }
    me = (await client.get("/me", headers=auth(writer))).json()
    assert me == {"tenant": "globex", "scope": "read_write", "read_only": False, "expires_at": None}
    assert (await client.get("/me")).status_code == 401


async def test_services_that_know_only_tenants_let_every_key_write() -> None:
    keys = MemoryKeys()
    services = Services(
        storage=MemoryStorage(), tenant_for_key=keys.tenant_for_key, limits=Limits()
    )
    assert await services.grant(keys.create("acme", "x", scope=READ_ONLY)) is not None
    app = create_app(Settings.from_env(), services=services)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        key = keys.create("acme", "agent")
        response = await client.post("/conversations", json={"id": "x"}, headers=auth(key))
        assert response.status_code == 201
        assert (await client.get("/me", headers=auth(key))).json()["scope"] == "read_write"


def test_an_unknown_scope_is_refused() -> None:
    with pytest.raises(ValueError, match="scope"):
        MemoryKeys().create("acme", "x", scope="admin")  # type: ignore[arg-type]


async def test_the_lookup_answers_the_scope_from_postgres(
    engine: AsyncEngine, database_url: str, settings: Settings
) -> None:
    _, reader = await create_key(engine, "acme", "analyst", scope=READ_ONLY)
    _, writer = await create_key(engine, "acme", "agent")
    listed = {key.name: key.scope for key in await list_keys(engine, "acme")}
    assert listed == {"analyst": "read_only", "agent": "read_write"}
    keys = await KeyLookup.connect(database_url, options=settings.connection_options())
    try:
        for _ in range(2):  # asked, then remembered: the scope either way
            grant = await keys.grant_for_key(reader)
            assert grant is not None
            assert (grant.tenant, grant.read_only) == ("acme", True)
            grant = await keys.grant_for_key(writer)
            assert grant is not None
            assert (grant.tenant, grant.read_only) == ("acme", False)
        services = Services(
            storage=MemoryStorage(),
            tenant_for_key=keys.tenant_for_key,
            grant_for_key=keys.grant_for_key,
            limits=Limits(),
        )
        app = create_app(settings, services=services)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            refused = await client.post("/conversations", json={"id": "x"}, headers=auth(reader))
            assert refused.status_code == 403
            assert brief(refused)["type"] == "ReadOnlyKey"
            made = await client.post("/conversations", json={"id": "x"}, headers=auth(writer))
            assert made.status_code == 201
            listed_by_reader = await client.get("/conversations", headers=auth(reader))
            assert [c["id"] for c in listed_by_reader.json()["items"]] == ["x"]
    finally:
        await keys.close()
