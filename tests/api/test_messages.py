"""api.routes.messages: append (idempotency, concurrency, validation), replace."""

from __future__ import annotations

import httpx

from tests.api.conftest import TOOL_TURN, brief, new_conversation


async def test_append_stores_the_messages_numbered(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.post(f"/conversations/{cid}/messages", json={"messages": TOOL_TURN})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["conversation_id"] == cid
    assert body["replayed"] is False
    assert body["version"] == 1 + len(TOOL_TURN)
    stored = body["messages"]
    assert [m["seq"] for m in stored] == [1, 2, 3, 4, 5]
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[1]["kind"] == "input"  # a user message is typed by a person
    assert stored[2]["tool_calls"] == [{"id": "call_1", "name": "ls", "arguments": {"path": "."}}]
    assert stored[3]["tool_call_id"] == "call_1"
    assert all(m["token_estimate"] > 0 for m in stored)


async def test_a_retry_with_the_same_idempotency_key_replays(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    body = {
        "messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    }
    headers = {"Idempotency-Key": "turn-1"}
    first = await acme.post(f"/conversations/{cid}/messages", json=body, headers=headers)
    retry = await acme.post(f"/conversations/{cid}/messages", json=body, headers=headers)
    assert first.status_code == 201
    assert retry.status_code == 200
    assert retry.json()["replayed"] is True
    assert [m["seq"] for m in retry.json()["messages"]] == [
        m["seq"] for m in first.json()["messages"]
    ]
    assert retry.json()["version"] == first.json()["version"]
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert [m["content"] for m in window] == ["hello", "hi"]


async def test_the_same_key_with_other_content_is_a_409(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    headers = {"Idempotency-Key": "turn-1"}
    url = f"/conversations/{cid}/messages"
    await acme.post(url, json={"messages": [{"role": "user", "content": "a"}]}, headers=headers)
    response = await acme.post(
        url, json={"messages": [{"role": "user", "content": "b"}]}, headers=headers
    )
    assert response.status_code == 409
    assert response.json()["type"] == "IdempotencyConflict"
    assert "turn-1" in response.json()["detail"]


async def test_a_stale_expected_version_is_a_409_naming_both_versions(
    acme: httpx.AsyncClient,
) -> None:
    cid = await new_conversation(acme)  # version 1
    url = f"/conversations/{cid}/messages"
    ok = await acme.post(
        url, json={"messages": [{"role": "user", "content": "a"}], "expected_version": 1}
    )
    assert ok.status_code == 201
    response = await acme.post(
        url, json={"messages": [{"role": "user", "content": "b"}], "expected_version": 1}
    )
    assert response.status_code == 409
    error = response.json()
    assert error["type"] == "ConcurrencyConflict"
    assert (error["expected"], error["actual"]) == (1, 2)
    assert "expected 1, but it is at version 2" in error["detail"]
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert [m["content"] for m in window] == ["a"]


async def test_a_result_for_an_unknown_call_is_a_422_and_nothing_is_stored(
    acme: httpx.AsyncClient,
) -> None:
    cid = await new_conversation(acme)
    url = f"/conversations/{cid}/messages"
    await acme.post(url, json={"messages": TOOL_TURN})
    before = (await acme.get(f"/conversations/{cid}")).json()
    response = await acme.post(
        url,
        json={
            "messages": [
                {"role": "user", "content": "and now?"},
                {"role": "tool", "tool_call_id": "call_404", "content": "??"},
            ]
        },
    )
    assert response.status_code == 422
    error = response.json()
    assert error["type"] == "InvalidMessage"
    assert "message #1" in error["detail"]
    assert "call_404" in error["detail"]
    assert (await acme.get(f"/conversations/{cid}")).json() == before
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert [m["seq"] for m in window] == [1, 2, 3, 4, 5]


async def test_a_malformed_message_is_a_422_naming_the_field(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.post(
        f"/conversations/{cid}/messages", json={"messages": [{"role": "robot", "content": "x"}]}
    )
    assert response.status_code == 422
    error = response.json()
    assert error["type"] == "ValidationError"
    assert error["detail"].startswith("body.messages.0.role:")


async def test_an_empty_append_is_a_422(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.post(f"/conversations/{cid}/messages", json={"messages": []})
    assert response.status_code == 422
    assert brief(response) == {
        "type": "InvalidOperation",
        "detail": "append needs at least one message",
    }


async def test_append_to_a_missing_conversation_is_a_404(acme: httpx.AsyncClient) -> None:
    response = await acme.post(
        "/conversations/00000000-0000-0000-0000-000000000001/messages",
        json={"messages": [{"role": "user", "content": "x"}]},
    )
    assert response.status_code == 404
    assert response.json()["type"] == "ConversationNotFound"


async def test_replace_edits_the_content(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await acme.post(f"/conversations/{cid}/messages", json={"messages": TOOL_TURN})
    response = await acme.put(
        f"/conversations/{cid}/messages/2", json={"content": "list all the files"}
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"conversation_id": cid, "version": 7}
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert window[1]["content"] == "list all the files"
    assert window[1]["edited"] is True


async def test_replace_of_a_missing_seq_is_a_422(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.put(f"/conversations/{cid}/messages/9", json={"content": "x"})
    assert response.status_code == 422
    assert response.json()["detail"] == "there is no message with seq 9"
