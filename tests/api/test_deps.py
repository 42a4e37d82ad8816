"""api.deps: API keys (Bearer or X-API-Key) and tenant isolation."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from hosting.keys import create_key, list_keys, revoke_key
from tests.api.conftest import TOOL_TURN, auth, brief, new_conversation


async def test_no_key_is_401(client: httpx.AsyncClient) -> None:
    response = await client.post("/conversations", json={})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["type"] == "Unauthorized"
    assert "API key is required" in response.json()["detail"]


@pytest.mark.parametrize("bad", ["cs_not-a-key", "nonsense", ""])
async def test_an_unknown_key_is_401(client: httpx.AsyncClient, bad: str) -> None:
    response = await client.post("/conversations", json={}, headers=auth(bad))
    assert response.status_code == 401
    assert response.json()["type"] == "Unauthorized"


async def test_x_api_key_header_is_accepted(client: httpx.AsyncClient, key: str) -> None:
    response = await client.post("/conversations", json={}, headers={"X-API-Key": key})
    assert response.status_code == 201
    assert response.json()["tenant"] == "acme"


async def test_a_revoked_key_is_401(
    client: httpx.AsyncClient, engine: AsyncEngine, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("revocation is a property of the stored keys (hosting.keys)")
    key_id, key = await create_key(engine, "acme", "short-lived")
    assert (await client.post("/conversations", json={}, headers=auth(key))).status_code == 201
    assert await revoke_key(engine, key_id)
    # The server hears of it by a NOTIFY on its own connection, which may come
    # a moment after the revoking one's echo on a busy machine.
    for _ in range(50):
        response = await client.post("/conversations", json={}, headers=auth(key))
        if response.status_code != 201:
            break
        await asyncio.sleep(0.1)
    assert response.status_code == 401
    assert response.json()["detail"] == "the API key is unknown or revoked"
    assert [k.active for k in await list_keys(engine, "acme")] == [False]


async def test_auth_is_checked_before_the_body(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/conversations/not-a-uuid/messages", json={"nonsense": 1}, headers=auth("cs_x")
    )
    assert response.status_code == 401


async def test_another_tenants_conversation_is_a_404_like_a_missing_one(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    cid = await new_conversation(client)
    assert (
        await client.post(f"/conversations/{cid}/messages", json={"messages": TOOL_TURN})
    ).status_code == 201

    client.headers.update(auth(other_key))
    attempts = [
        client.get(f"/conversations/{cid}"),
        client.get(f"/conversations/{cid}/window"),
        client.get(f"/conversations/{cid}/counts"),
        client.post(
            f"/conversations/{cid}/messages", json={"messages": [{"role": "user", "content": "x"}]}
        ),
        client.post(f"/conversations/{cid}/archive"),
        client.post(f"/conversations/{cid}/batches", json={"operation": "clear"}),
        client.post(f"/conversations/{cid}/assemble", json={}),
        client.delete(f"/conversations/{cid}"),
    ]
    for attempt in attempts:
        response = await attempt
        assert response.status_code == 404, response.text
        assert brief(response) == {
            "type": "ConversationNotFound",
            "detail": f"conversation {cid} does not exist",
        }
    # ... and tenant acme still sees everything, unchanged.
    client.headers.update(auth(key))
    window = (await client.get(f"/conversations/{cid}/window")).json()
    assert [m["seq"] for m in window] == [1, 2, 3, 4, 5]
    assert (await client.get(f"/conversations/{cid}")).json()["archived"] is False


async def test_ids_are_unique_per_tenant_and_tell_nothing_of_other_tenants(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    created = await client.post(
        "/conversations", json={"id": "user-123", "metadata": {"owner": "acme"}}
    )
    assert created.status_code == 201, created.text
    assert created.json()["id"] == "user-123"
    await client.post(
        "/conversations/user-123/messages", json={"messages": [{"role": "user", "content": "mine"}]}
    )

    # The other tenant's "user-123" is another conversation: created, not refused.
    twin = await client.post("/conversations", json={"id": "user-123"}, headers=auth(other_key))
    assert twin.status_code == 201, twin.text
    theirs = (await client.get("/conversations/user-123", headers=auth(other_key))).json()
    assert (theirs["id"], theirs["version"], theirs["metadata"]) == ("user-123", 1, {})
    conversation = (await client.get("/conversations/user-123")).json()
    assert (conversation["tenant"], conversation["version"]) == ("acme", 2)
    assert conversation["metadata"] == {"owner": "acme"}
    # Creating it again in one's own tenant conflicts.
    again = await client.post("/conversations", json={"id": "user-123"})
    assert again.status_code == 409


@pytest.mark.parametrize("bad", ["", "a" * 201, "line\nbreak", " padded"])
async def test_ids_that_are_not_printable_strings_are_refused_with_422(
    client: httpx.AsyncClient, key: str, bad: str
) -> None:
    client.headers.update(auth(key))
    response = await client.post("/conversations", json={"id": bad})
    assert response.status_code == 422, response.text


@pytest.mark.parametrize("chosen", ["team/alice", "会话 42", "user-123", "a?b#c%d"])
async def test_any_printable_id_is_addressable_over_http(
    client: httpx.AsyncClient, key: str, chosen: str
) -> None:
    client.headers.update(auth(key))
    created = await client.post("/conversations", json={"id": chosen})
    assert created.status_code == 201, created.text
    path = "/conversations/" + quote(chosen, safe="")
    appended = await client.post(
        f"{path}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert appended.status_code in (200, 201), appended.text
    assert appended.json()["conversation_id"] == chosen
    got = (await client.get(path)).json()
    assert (got["id"], got["version"]) == (chosen, 2)
