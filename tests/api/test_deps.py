"""api.deps: API keys (Bearer or X-API-Key) and tenant isolation."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from store.api_keys import create_key, list_keys, revoke_key
from tests.api.conftest import TOOL_TURN, auth, new_conversation


async def test_no_key_is_401(client: httpx.AsyncClient) -> None:
    response = await client.post("/conversations", json={})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["type"] == "Unauthorized"
    assert "API key is required" in response.json()["error"]["message"]


@pytest.mark.parametrize("bad", ["cs_not-a-key", "nonsense", ""])
async def test_an_unknown_key_is_401(client: httpx.AsyncClient, bad: str) -> None:
    response = await client.post("/conversations", json={}, headers=auth(bad))
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "Unauthorized"


async def test_x_api_key_header_is_accepted(client: httpx.AsyncClient, key: str) -> None:
    response = await client.post("/conversations", json={}, headers={"X-API-Key": key})
    assert response.status_code == 201
    assert response.json()["tenant"] == "acme"


async def test_a_revoked_key_is_401(
    client: httpx.AsyncClient, engine: AsyncEngine, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("revocation is a property of the stored keys (store.api_keys)")
    key_id, key = await create_key(engine, "acme", "short-lived")
    assert (await client.post("/conversations", json={}, headers=auth(key))).status_code == 201
    assert await revoke_key(engine, key_id)
    response = await client.post("/conversations", json={}, headers=auth(key))
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "the API key is unknown or revoked"
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
        assert response.json() == {
            "error": {
                "type": "ConversationNotFound",
                "message": f"conversation {cid} does not exist",
            }
        }
    # ... and tenant acme still sees everything, unchanged.
    client.headers.update(auth(key))
    window = (await client.get(f"/conversations/{cid}/window")).json()
    assert [m["seq"] for m in window] == [1, 2, 3, 4, 5]
    assert (await client.get(f"/conversations/{cid}")).json()["archived"] is False


async def test_creating_with_another_tenants_id_is_refused_and_changes_nothing(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    cid = await new_conversation(client, metadata={"owner": "acme"})
    response = await client.post("/conversations", json={"id": cid}, headers=auth(other_key))
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "ConversationNotFound"
    conversation = (await client.get(f"/conversations/{cid}")).json()
    assert (conversation["tenant"], conversation["version"]) == ("acme", 1)
    assert conversation["metadata"] == {"owner": "acme"}
