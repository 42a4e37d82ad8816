"""GET /conversations/{id}/export: JSON Lines, typed, paged, tenant-scoped."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from store.repository.export import LINE_TYPES, PAGE_SIZE
from tests.api.conftest import TOOL_TURN, auth, new_conversation, summarise


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


async def append(client: httpx.AsyncClient, cid: str, messages: list[dict[str, Any]]) -> None:
    response = await client.post(f"/conversations/{cid}/messages", json={"messages": messages})
    assert response.status_code in (200, 201), response.text


async def test_every_line_is_typed_so_user_input_and_system_text_never_mix(
    acme: httpx.AsyncClient,
) -> None:
    cid = await new_conversation(acme)
    await append(acme, cid, TOOL_TURN)
    await append(
        acme,
        cid,
        [
            {"role": "system", "kind": "reminder", "content": "The TODO list changed."},
            {"role": "user", "kind": "reminder", "content": "<file read: a.txt>"},
            {"role": "user", "content": "thanks"},
            {"role": "user", "kind": "summary", "content": "They listed files."},
        ],
    )

    exported = lines(await acme.get(f"/conversations/{cid}/export"))
    assert [(m["seq"], m["type"]) for m in exported] == [
        (1, "system"),
        (2, "user"),
        (3, "assistant"),
        (4, "tool"),
        (5, "assistant"),
        (6, "reminder"),
        (7, "reminder"),
        (8, "user"),
        (9, "summary"),
    ]
    assert {m["type"] for m in exported} <= set(LINE_TYPES)
    assert all(m["conversation_id"] == cid for m in exported)
    user_input = exported[1]
    assert user_input["kind"] == "input"
    assert user_input["role"] == "user"
    assert user_input["content"] == "list the files"
    assert exported[6]["role"] == "user"  # a reminder in a user turn is still a reminder
    call = exported[2]
    assert call["tool_calls"] == [{"id": "call_1", "name": "ls", "arguments": {"path": "."}}]
    assert exported[3]["tool_call_id"] == "call_1"
    first = exported[0]
    for field in ("agent_id", "batch", "recorded_at", "content", "reasoning", "metadata"):
        assert field in first
    assert list(first)[:2] == ["type", "conversation_id"]


async def test_a_compaction_summary_is_typed_summary(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await append(acme, cid, TOOL_TURN)
    response = await summarise(acme, cid, 6, "They listed files.")
    assert response.status_code in (200, 201), response.text
    *_, summary = lines(await acme.get(f"/conversations/{cid}/export"))
    assert (summary["seq"], summary["type"], summary["batch"]) == (6, "summary", 2)


async def test_a_long_conversation_is_exported_whole_in_order_across_pages(
    acme: httpx.AsyncClient,
) -> None:
    cid = await new_conversation(acme)
    total = PAGE_SIZE * 2 + 37
    for start in range(0, total, 1000):
        batch = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
            for i in range(start, min(start + 1000, total))
        ]
        await append(acme, cid, batch)
    exported = lines(await acme.get(f"/conversations/{cid}/export"))
    assert [m["seq"] for m in exported] == list(range(1, total + 1))
    assert [m["content"] for m in exported[-2:]] == [f"m{total - 2}", f"m{total - 1}"]


async def test_events_true_exports_the_raw_log(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await append(acme, cid, TOOL_TURN)
    exported = lines(await acme.get(f"/conversations/{cid}/export", params={"events": "true"}))
    assert [e["version"] for e in exported] == list(range(1, 7))
    assert exported[0]["type"] == "conversation_started"
    assert {e["type"] for e in exported[1:]} == {"message_appended"}
    assert all(e["conversation_id"] == cid for e in exported)
    paged = (await acme.get(f"/conversations/{cid}/events", params={"limit": 1000})).json()
    assert exported == paged["events"]


async def test_an_empty_conversation_exports_nothing(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    assert lines(await acme.get(f"/conversations/{cid}/export")) == []


@pytest.mark.parametrize("path", ["00000000-0000-0000-0000-000000000001", "no-such-id"])
async def test_an_unknown_conversation_is_404(acme: httpx.AsyncClient, path: str) -> None:
    response = await acme.get(f"/conversations/{path}/export")
    assert response.status_code == 404
    assert response.json()["type"] == "ConversationNotFound"


async def test_another_tenants_conversation_is_404(acme: httpx.AsyncClient, other_key: str) -> None:
    cid = await new_conversation(acme)
    await append(acme, cid, TOOL_TURN)
    for params in ({}, {"events": "true"}):
        response = await acme.get(
            f"/conversations/{cid}/export", params=params, headers=auth(other_key)
        )
        assert response.status_code == 404, response.text


async def test_a_deleted_conversation_is_410(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    assert (await acme.delete(f"/conversations/{cid}")).status_code == 204
    assert (await acme.get(f"/conversations/{cid}/export")).status_code == 410


async def test_a_bad_events_flag_is_422(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    response = await acme.get(f"/conversations/{cid}/export", params={"events": "maybe"})
    assert response.status_code == 422


async def test_export_needs_a_key(client: httpx.AsyncClient) -> None:
    response = await client.get("/conversations/00000000-0000-0000-0000-000000000001/export")
    assert response.status_code == 401


async def test_the_openapi_names_the_operation(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    operation = schema["paths"]["/conversations/{conversation_id}/export"]["get"]
    assert operation["operationId"] == "exportConversation"
    assert all(p.get("description") for p in operation["parameters"])
    assert "application/x-ndjson" in operation["responses"]["200"]["content"]
