"""api.routes.compaction: POST /compactions and POST /conversations/{id}/compact,
on both backends, tenant by tenant."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import auth, new_conversation
from tests.chat_stub import ChatStub, chat_answer


def _turns(count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "rules"}]
    for k in range(count):
        messages += [
            {"role": "user", "content": f"request {k}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{k}", "name": "search", "arguments": {"q": k}}],
            },
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"found {k}"},
            {"role": "assistant", "content": f"answer {k}"},
        ]
    return messages


async def _long_conversation(client: httpx.AsyncClient, turns: int = 10) -> str:
    cid = await new_conversation(client)
    response = await client.post(f"/conversations/{cid}/messages", json={"messages": _turns(turns)})
    assert response.status_code == 201, response.text
    return cid


async def _window(client: httpx.AsyncClient, cid: str) -> list[dict[str, Any]]:
    response = await client.get(f"/conversations/{cid}/window")
    assert response.status_code == 200, response.text
    body: list[dict[str, Any]] = response.json()
    return body


async def test_a_dry_run_answers_the_plan_and_changes_nothing(acme: httpx.AsyncClient) -> None:
    cid = await _long_conversation(acme)
    before = await _window(acme, cid)
    response = await acme.post("/compactions", json={"max_messages": 20, "dry_run": True})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["dry_run"] is True
    assert report["tenant"] == "acme"
    (result,) = report["results"]
    assert result["conversation_id"] == cid
    assert result["status"] == "planned"
    assert result["boundary_seq"] == 34
    assert result["hidden_range"] == [2, 33]
    assert result["before"] == {"messages": 41, "tokens": result["before"]["tokens"]}
    assert await _window(acme, cid) == before


async def test_compacting_starts_a_batch_with_a_summary(acme: httpx.AsyncClient) -> None:
    cid = await _long_conversation(acme)
    response = await acme.post("/compactions", json={"max_messages": 20, "keep_last": {"user": 1}})
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["status"] == "compacted"
    assert result["batch"] == 2
    window = await _window(acme, cid)
    assert [m["kind"] for m in window][:2] == ["output", "summary"]
    assert len(window) == result["after"]["messages"]
    again = await acme.post("/compactions", json={"max_messages": 20})
    assert again.json()["results"] == []


async def test_one_conversation(acme: httpx.AsyncClient) -> None:
    cid = await _long_conversation(acme)
    short = await _long_conversation(acme, turns=1)
    planned = await acme.post(
        f"/conversations/{cid}/compact", json={"max_tokens": 50, "dry_run": True}
    )
    assert planned.status_code == 200, planned.text
    assert planned.json()["status"] == "planned"
    done = await acme.post(f"/conversations/{cid}/compact", json={"max_tokens": 50})
    assert done.json()["status"] == "compacted"
    below = await acme.post(f"/conversations/{short}/compact", json={"max_messages": 20})
    assert below.json()["status"] == "below_threshold"


async def test_tenants_never_see_each_others_conversations(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    ours = await _long_conversation(client)
    before = await _window(client, ours)
    theirs_response = await client.post(
        "/compactions", json={"max_messages": 20, "dry_run": True}, headers=auth(other_key)
    )
    assert theirs_response.json()["results"] == []
    named = await client.post(
        "/compactions",
        json={"max_messages": 20, "conversation_ids": [ours]},
        headers=auth(other_key),
    )
    assert [r["status"] for r in named.json()["results"]] == ["not_found"]
    one = await client.post(
        f"/conversations/{ours}/compact", json={"max_messages": 20}, headers=auth(other_key)
    )
    assert one.status_code == 404
    assert await _window(client, ours) == before


async def test_an_archived_conversation_is_refused(acme: httpx.AsyncClient) -> None:
    cid = await _long_conversation(acme)
    assert (await acme.post(f"/conversations/{cid}/archive")).status_code == 200
    response = await acme.post(f"/conversations/{cid}/compact", json={"max_messages": 20})
    assert response.status_code == 409
    assert response.json()["type"] == "ConversationIsArchived"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({}, "name a threshold"),
        ({"max_messages": 0}, "max_messages"),
        ({"max_messages": "20"}, "max_messages"),
        ({"max_tokens": 10**12}, "max_tokens"),
        ({"max_messages": 20, "keep_last": {"robot": 1}}, "keep_last"),
        ({"max_messages": 20, "keep_last": {"user": -1}}, "keep_last"),
        ({"max_messages": 20, "target_ratio": 2}, "target_ratio"),
        ({"max_messages": 20, "limit": 100_000}, "limit"),
        ({"max_messages": 20, "conversation_ids": []}, "conversation_ids"),
        ({"max_messages": 20, "conversation_ids": ["x" * 201]}, "conversation_ids"),
        ({"max_messages": 20, "dry_run": "yes"}, "dry_run"),
        ({"max_messages": 20, "surprise": 1}, "surprise"),
        ({"max_messages": 20, "agent_id": "bad agent\x00"}, "agent_id"),
    ],
)
async def test_hostile_bodies_are_refused_by_name(
    acme: httpx.AsyncClient, body: dict[str, Any], named: str
) -> None:
    response = await acme.post("/compactions", json=body)
    assert response.status_code == 422, response.text
    assert named in response.text


async def test_the_operations_are_named(acme: httpx.AsyncClient) -> None:
    document = (await acme.get("/openapi.json")).json()
    assert document["paths"]["/compactions"]["post"]["operationId"] == "compactConversations"
    assert (
        document["paths"]["/conversations/{conversation_id}/compact"]["post"]["operationId"]
        == "compactConversation"
    )


# --- a model summarizer, against a stub OpenAI-compatible server on 127.0.0.1 -----------


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Any:
    stubs: list[ChatStub] = []

    def start(answer: Any, status: int = 200) -> ChatStub:
        stub = ChatStub(answer, status)
        stubs.append(stub)
        monkeypatch.setenv("CONVO_SUMMARIZER_URL", stub.url)
        monkeypatch.setenv("CONVO_SUMMARIZER_MODEL", "summarizer-1")
        monkeypatch.setenv("CONVO_SUMMARIZER_API_KEY", "sk-test")
        return stub

    yield start
    for stub in stubs:
        stub.close()


async def test_a_model_writes_the_summary(acme: httpx.AsyncClient, model: Any) -> None:
    stub = model(chat_answer("The user searched ten times; all found."))
    cid = await _long_conversation(acme)
    response = await acme.post(
        "/compactions", json={"max_messages": 20, "summarizer": "openai-compatible"}
    )
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["status"] == "compacted"
    window = await _window(acme, cid)
    [summary] = [m for m in window if m["kind"] == "summary"]
    assert summary["content"] == "The user searched ten times; all found."
    [body] = stub.bodies
    assert body["model"] == "summarizer-1"
    assert "request 0" in body["messages"][1]["content"]
    assert stub.headers == ["Bearer sk-test"]


@pytest.mark.parametrize(
    ("answer", "status"),
    [({"error": "overloaded"}, 503), ({"choices": []}, 200), (chat_answer("   "), 200)],
)
async def test_a_failing_model_changes_nothing(
    acme: httpx.AsyncClient, model: Any, answer: Any, status: int
) -> None:
    model(answer, status)
    cid = await _long_conversation(acme)
    before = await _window(acme, cid)
    response = await acme.post(
        f"/conversations/{cid}/compact",
        json={"max_messages": 20, "summarizer": "openai-compatible"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "summary_failed"
    assert await _window(acme, cid) == before


async def test_a_model_summarizer_without_settings_is_refused_by_name(
    acme: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVO_SUMMARIZER_URL", raising=False)
    monkeypatch.delenv("CONVO_SUMMARIZER_MODEL", raising=False)
    response = await acme.post(
        "/compactions", json={"max_messages": 20, "summarizer": "openai-compatible"}
    )
    assert response.status_code == 422
    assert "CONVO_SUMMARIZER_URL and CONVO_SUMMARIZER_MODEL" in response.json()["detail"]
    unknown = await acme.post("/compactions", json={"max_messages": 20, "summarizer": "gpt"})
    assert unknown.status_code == 422
    assert unknown.json()["detail"].startswith("body.summarizer:")
