"""Caps per tenant (api.quota): conversations and bytes of log. A write
past a cap is a 403 `QuotaExceeded` naming it, and writes nothing; reads
and deletes go on; other tenants are not affected; counted in /metrics."""

from __future__ import annotations

import re

import httpx

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.domain.messages import Message
from store.memory import MemoryStorage
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.api.conftest import BASE_URL, auth, brief


def _clients(settings: Settings) -> tuple[httpx.AsyncClient, dict[str, str], dict[str, str]]:
    keys = MemoryKeys()
    acme, globex = auth(keys.create("acme", "t")), auth(keys.create("globex", "t"))
    services = Services(
        storage=MemoryStorage(), tenant_for_key=keys.tenant_for_key, limits=Limits()
    )
    transport = httpx.ASGITransport(app=create_app(settings, services=services))
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL), acme, globex


async def test_a_tenant_at_its_cap_of_conversations_cannot_create_or_fork_one() -> None:
    client, acme, globex = _clients(Settings(tenant_max_conversations=2))
    async with client:
        for name in ("a", "b"):
            created = await client.post("/conversations", json={"id": name}, headers=acme)
            assert created.status_code == 201
        refused = await client.post("/conversations", json={"id": "c"}, headers=acme)
        assert refused.status_code == 403
        assert brief(refused)["type"] == "QuotaExceeded"
        assert refused.json()["cap"] == "conversations"
        assert "its cap of 2" in refused.json()["detail"]
        forked = await client.post("/conversations/a/fork", json={}, headers=acme)
        assert forked.status_code == 403, forked.text
        assert (await client.get("/conversations/c", headers=acme)).status_code == 404
        # Reads go on; another tenant has its own count.
        assert (await client.get("/conversations/a", headers=acme)).status_code == 200
        created = await client.post("/conversations", json={"id": "a"}, headers=globex)
        assert created.status_code == 201
        metrics = (await client.get("/metrics")).text
    assert re.search(r'^convo_quota_refused_total\{cap="conversations"\} 2\.0$', metrics, re.M)


async def test_a_write_past_the_tenants_stored_bytes_is_refused_and_writes_nothing() -> None:
    client, acme, _ = _clients(Settings(tenant_max_stored_bytes=4000))
    async with client:
        client.headers.update(acme)
        assert (await client.post("/conversations", json={"id": "c"})).status_code == 201
        small = {"messages": [{"role": "user", "content": "x" * 1000}]}
        assert (await client.post("/conversations/c/messages", json=small)).status_code == 201
        big = {"messages": [{"role": "user", "content": "y" * 3000}]}
        refused = await client.post("/conversations/c/messages", json=big)
        assert refused.status_code == 403, refused.text
        assert refused.json()["cap"] == "stored_bytes"
        assert "its cap of 4000" in refused.json()["detail"]
        window = (await client.get("/conversations/c/window")).json()
        assert len(window) == 1
        # Deleting frees room (once the figures are asked again).
        assert (await client.delete("/conversations/c")).status_code in (200, 204)


async def test_the_postgres_storage_counts_a_tenants_conversations_and_log_bytes(
    database_url: str,
) -> None:
    storage = await PostgresStorage.connect(database_url)
    try:
        acme = Repository(storage, tenant="acme")
        assert await storage.tenant_usage("acme") == (0, 0)
        await acme.create_conversation("a")
        await acme.create_conversation("b")
        await acme.append_messages("a", [Message(role="user", content="z" * 5000)])
        await acme.delete("b")
        await Repository(storage, tenant="globex").create_conversation("a")
        conversations, stored = await storage.tenant_usage("acme")
        assert conversations == 1
        assert stored > 0  # the log, as stored (5000 repeated characters compress well)
        assert (await storage.tenant_usage("globex"))[0] == 1
    finally:
        await storage.close()
