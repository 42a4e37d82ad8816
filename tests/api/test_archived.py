"""Archived means read-only: every write is a 409 `ConversationIsArchived`
until the conversation is unarchived; reads, archive, unarchive and delete work."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import TOOL_TURN, auth, brief, new_conversation

USER = {"role": "user", "content": "hello"}

WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("post", "/messages", {"messages": [USER]}),
    ("put", "/messages/2", {"content": "edited"}),
    ("post", "/batches", {"operation": "truncate", "keep_last": 1, "adjust": True}),
    ("put", "/agents/main/slots/notes", {"value": "a note"}),
    ("put", "/agents/helper", {"role_definition": "You help."}),
    ("patch", "", {"metadata": {"a": 1}}),
]


async def _archived(client: httpx.AsyncClient) -> str:
    cid = await new_conversation(client)
    appended = await client.post(f"/conversations/{cid}/messages", json={"messages": TOOL_TURN})
    assert appended.status_code == 201
    archived = await client.post(f"/conversations/{cid}/archive")
    assert archived.status_code == 200
    assert archived.json()["archived"] is True
    return cid


@pytest.mark.parametrize(("method", "path", "body"), WRITES, ids=[w[1] or "/" for w in WRITES])
async def test_every_write_to_an_archived_conversation_is_a_409(
    acme: httpx.AsyncClient, method: str, path: str, body: dict[str, Any]
) -> None:
    cid = await _archived(acme)
    version = (await acme.get(f"/conversations/{cid}")).json()["version"]
    response = await acme.request(method, f"/conversations/{cid}{path}", json=body)
    assert response.status_code == 409, response.text
    assert brief(response) == {
        "type": "ConversationIsArchived",
        "detail": f"conversation {cid} is archived, so it is read-only;"
        " unarchive it before writing to it",
    }
    assert (await acme.get(f"/conversations/{cid}")).json()["version"] == version
    # Unarchived, the same write goes through.
    unarchived = await acme.post(f"/conversations/{cid}/unarchive")
    assert unarchived.status_code == 200
    assert unarchived.json()["archived"] is False
    again = await acme.request(method, f"/conversations/{cid}{path}", json=body)
    assert again.status_code in (200, 201), again.text


async def test_reads_still_work_and_archive_and_unarchive_are_idempotent(
    acme: httpx.AsyncClient,
) -> None:
    cid = await _archived(acme)
    version = (await acme.get(f"/conversations/{cid}")).json()["version"]
    assert len((await acme.get(f"/conversations/{cid}/window")).json()) == len(TOOL_TURN)
    assert (await acme.get(f"/conversations/{cid}/messages")).status_code == 200
    # Archiving again writes nothing; unarchiving twice writes one event.
    assert (await acme.post(f"/conversations/{cid}/archive")).json()["version"] == version
    first = (await acme.post(f"/conversations/{cid}/unarchive")).json()
    second = (await acme.post(f"/conversations/{cid}/unarchive")).json()
    assert first["version"] == second["version"] == version + 1
    assert second["archived"] is False


async def test_an_archived_conversation_can_be_deleted(acme: httpx.AsyncClient) -> None:
    cid = await _archived(acme)
    assert (await acme.delete(f"/conversations/{cid}")).status_code == 204
    assert (await acme.post(f"/conversations/{cid}/unarchive")).status_code == 410


async def test_another_tenant_cannot_unarchive_or_archive(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    cid = await _archived(client)
    for action in ("unarchive", "archive"):
        response = await client.post(f"/conversations/{cid}/{action}", headers=auth(other_key))
        assert response.status_code == 404
        assert response.json()["type"] == "ConversationNotFound"
    assert (await client.get(f"/conversations/{cid}")).json()["archived"] is True


async def test_unarchive_of_a_missing_conversation_is_a_404(acme: httpx.AsyncClient) -> None:
    response = await acme.post("/conversations/no-such-conversation/unarchive")
    assert response.status_code == 404
