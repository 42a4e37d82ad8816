"""api.routes.conversations: create, read, update metadata, archive, delete
(listing: test_listing.py; archived conversations: test_archived.py)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.api.conftest import TOOL_TURN, assert_refused, auth, brief, new_conversation


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
    assert brief(again) == {
        "type": "ConversationExists",
        "detail": f"conversation {chosen} already exists; choose another id",
    }


async def test_an_unknown_field_is_a_422(acme: httpx.AsyncClient) -> None:
    response = await acme.post("/conversations", json={"meta": {}})
    assert response.status_code == 422
    assert "body.meta: Extra inputs are not permitted" in response.json()["detail"]


async def test_an_id_past_its_limit_is_a_422_and_an_unknown_one_a_404(
    acme: httpx.AsyncClient,
) -> None:
    response = await acme.get(f"/conversations/{'x' * 201}")
    assert response.status_code == 422
    assert response.json()["detail"].startswith("path.conversation_id:")
    assert (await acme.get("/conversations/not-a-known-id")).status_code == 404


async def test_a_missing_conversation_is_a_404(acme: httpx.AsyncClient) -> None:
    missing = uuid.uuid4()
    response = await acme.get(f"/conversations/{missing}")
    assert response.status_code == 404
    assert response.json() == {
        "type": "ConversationNotFound",
        "title": "No such conversation",
        "status": 404,
        "detail": f"conversation {missing} does not exist",
        "instance": response.headers["X-Request-ID"],
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
    assert brief(append) == {
        "type": "ConversationDeleted",
        "detail": f"conversation {cid} was deleted",
    }
    assert (await acme.delete(f"/conversations/{cid}")).status_code == 410
    # The content is purged, but the tombstone says what happened.
    assert (await acme.get(f"/conversations/{cid}/window")).status_code == 410


async def _patch(client: httpx.AsyncClient, cid: str, **body: Any) -> httpx.Response:
    return await client.patch(f"/conversations/{cid}", json=body)


async def test_update_metadata_is_a_merge_patch(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme, metadata={"a": 1, "b": {"x": 1, "y": 2}, "c": "keep"})
    response = await _patch(acme, cid, metadata={"a": None, "b": {"y": None, "z": 3}, "d": [1]})
    assert response.status_code == 200, response.text
    assert response.json()["metadata"] == {"b": {"x": 1, "z": 3}, "c": "keep", "d": [1]}
    assert response.json()["version"] == 2
    read = (await acme.get(f"/conversations/{cid}")).json()
    assert read["metadata"] == {"b": {"x": 1, "z": 3}, "c": "keep", "d": [1]}


async def test_update_metadata_replace_and_a_no_op(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme, metadata={"a": 1})
    replaced = await _patch(acme, cid, metadata={"b": 2, "gone": None}, mode="replace")
    assert replaced.json()["metadata"] == {"b": 2}
    assert replaced.json()["version"] == 2
    # The same again changes nothing, so nothing is written.
    again = await _patch(acme, cid, metadata={"b": 2})
    assert again.status_code == 200
    assert again.json()["version"] == 2
    # JSON's 1 and true differ, though Python's do not.
    typed = await _patch(acme, cid, metadata={"b": True})
    assert typed.json()["metadata"] == {"b": True}
    assert typed.json()["version"] == 3


async def test_update_metadata_checks_the_expected_version(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    stale = await _patch(acme, cid, metadata={"a": 1}, expected_version=5)
    assert stale.status_code == 409
    assert stale.json()["type"] == "ConcurrencyConflict"
    fresh = await _patch(acme, cid, metadata={"a": 1}, expected_version=1)
    assert fresh.status_code == 200
    assert fresh.json()["version"] == 2


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"metadata": {"big": "x" * 70_000}}, "body.metadata"),
        ({"metadata": {"n": 2**70}}, "body.metadata"),
        ({"metadata": []}, "body.metadata"),
        ({"metadata": {}, "mode": "upsert"}, "body.mode"),
        ({"metadata": {}, "expected_version": "1"}, "body.expected_version"),
        ({"metadata": {}, "extra": 1}, "body.extra"),
        ({}, "body.metadata"),
    ],
)
async def test_update_metadata_refuses_hostile_input(
    acme: httpx.AsyncClient, body: dict[str, Any], problem: str
) -> None:
    cid = await new_conversation(acme)
    assert_refused(await acme.patch(f"/conversations/{cid}", json=body), problem)


async def test_a_merge_that_grows_past_the_limit_is_refused(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme, metadata={"a": "x" * 40_000})
    response = await _patch(acme, cid, metadata={"b": "y" * 40_000})
    assert response.status_code == 422
    assert "metadata" in response.json()["detail"]
    assert (await acme.get(f"/conversations/{cid}")).json()["version"] == 1


async def test_another_tenants_conversation_cannot_be_updated(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    cid = await new_conversation(client, metadata={"a": 1})
    response = await client.patch(
        f"/conversations/{cid}", json={"metadata": {"a": 2}}, headers=auth(other_key)
    )
    assert response.status_code == 404
    assert response.json()["type"] == "ConversationNotFound"
    assert (await client.get(f"/conversations/{cid}")).json()["metadata"] == {"a": 1}
