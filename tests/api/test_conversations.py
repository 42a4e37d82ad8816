"""api.routes.conversations: create, read, archive, delete."""

from __future__ import annotations

import uuid

import httpx

from tests.api.conftest import TOOL_TURN, new_conversation


async def test_create_and_read(acme: httpx.AsyncClient) -> None:
    response = await acme.post("/conversations", json={"metadata": {"project": "x"}})
    assert response.status_code == 201
    created = response.json()
    assert created["tenant"] == "acme"
    assert created["version"] == 1
    assert created["current_batch"] == 1
    assert created["metadata"] == {"project": "x"}
    read = await acme.get(f"/conversations/{created['id']}")
    assert read.status_code == 200
    assert read.json() == created


async def test_create_with_a_chosen_id_and_again_is_a_409(acme: httpx.AsyncClient) -> None:
    chosen = str(uuid.uuid4())
    assert await new_conversation(acme, id=chosen) == chosen
    again = await acme.post("/conversations", json={"id": chosen})
    assert again.status_code == 409
    assert again.json()["error"]["type"] == "ConcurrencyConflict"


async def test_an_unknown_field_is_a_422(acme: httpx.AsyncClient) -> None:
    response = await acme.post("/conversations", json={"meta": {}})
    assert response.status_code == 422
    assert "body.meta: Extra inputs are not permitted" in response.json()["error"]["message"]


async def test_a_bad_id_in_the_path_is_a_422(acme: httpx.AsyncClient) -> None:
    response = await acme.get("/conversations/not-a-uuid")
    assert response.status_code == 422
    assert response.json()["error"]["message"].startswith("path.conversation_id:")


async def test_a_missing_conversation_is_a_404(acme: httpx.AsyncClient) -> None:
    missing = uuid.uuid4()
    response = await acme.get(f"/conversations/{missing}")
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "type": "ConversationNotFound",
            "message": f"conversation {missing} does not exist",
        }
    }


async def test_archive(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.post(f"/conversations/{cid}/archive")
    assert response.status_code == 200
    assert response.json()["archived"] is True
    assert (await acme.get(f"/conversations/{cid}")).json()["archived"] is True


async def test_delete_then_writes_and_reads_are_410(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await acme.post(f"/conversations/{cid}/messages", json={"messages": TOOL_TURN})
    response = await acme.delete(f"/conversations/{cid}")
    assert response.status_code == 204
    assert response.content == b""
    append = await acme.post(
        f"/conversations/{cid}/messages", json={"messages": [{"role": "user", "content": "x"}]}
    )
    assert append.status_code == 410
    assert append.json()["error"] == {
        "type": "ConversationDeleted",
        "message": f"conversation {cid} was deleted",
    }
    assert (await acme.delete(f"/conversations/{cid}")).status_code == 410
    # The content is purged, but the tombstone says what happened.
    assert (await acme.get(f"/conversations/{cid}/window")).status_code == 410
