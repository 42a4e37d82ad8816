"""api.routes.reads: window, recent by role, role ranges, counts, tool blocks."""

from __future__ import annotations

import httpx

from tests.api.conftest import TOOL_TURN, new_conversation

PENDING = [
    {"role": "user", "content": "and the folder src?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_2", "name": "ls", "arguments": {"path": "src"}}],
    },
]
SUB_AGENT = [{"role": "user", "content": "sub task", "agent_id": "helper"}]


async def _session(client: httpx.AsyncClient) -> str:
    cid = await new_conversation(client)
    response = await client.post(
        f"/conversations/{cid}/messages", json={"messages": [*TOOL_TURN, *PENDING, *SUB_AGENT]}
    )
    assert response.status_code == 201, response.text
    return cid


async def test_window_whole_and_per_agent(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert [m["seq"] for m in window] == [1, 2, 3, 4, 5, 6, 7, 8]
    helper = (await acme.get(f"/conversations/{cid}/window", params={"agent_id": "helper"})).json()
    assert [(m["seq"], m["agent_id"]) for m in helper] == [(8, "helper")]


async def test_recent_by_role(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    url = f"/conversations/{cid}/messages/recent"
    last_two = (await acme.get(url, params={"role": "user", "n": 2})).json()
    assert [m["content"] for m in last_two] == ["and the folder src?", "sub task"]
    main_only = await acme.get(url, params={"role": "user", "n": 5, "agent_id": "main"})
    assert [m["seq"] for m in main_only.json()] == [2, 6]
    history = await acme.get(url, params={"role": "assistant", "n": 1, "scope": "history"})
    assert [m["seq"] for m in history.json()] == [7]


async def test_recent_needs_a_known_role_and_n_not_negative(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    url = f"/conversations/{cid}/messages/recent"
    no_role = await acme.get(url)
    assert no_role.status_code == 422
    assert no_role.json()["error"]["message"] == "query.role: Field required"
    negative = await acme.get(url, params={"role": "user", "n": -1})
    assert negative.status_code == 422
    assert negative.json()["error"]["message"].startswith("query.n:")


async def test_role_range(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    response = await acme.get(
        f"/conversations/{cid}/roles/assistant", params={"first": 2, "last": 3}
    )
    assert [m["seq"] for m in response.json()] == [5, 7]
    backwards = await acme.get(f"/conversations/{cid}/roles/user", params={"first": 3, "last": 2})
    assert backwards.status_code == 422
    assert backwards.json()["error"] == {
        "type": "InvalidOperation",
        "message": "role_range needs 1 <= first <= last, got 3..2",
    }
    unknown_role = await acme.get(
        f"/conversations/{cid}/roles/robot", params={"first": 1, "last": 1}
    )
    assert unknown_role.status_code == 422


async def test_counts(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    await acme.post(f"/conversations/{cid}/batches", json={"operation": "truncate", "keep_last": 3})
    visible = (await acme.get(f"/conversations/{cid}/counts")).json()
    history = (await acme.get(f"/conversations/{cid}/counts", params={"scope": "history"})).json()
    assert history == {"system": 1, "user": 3, "assistant": 3, "tool": 1}
    assert sum(visible.values()) == 3


async def test_tool_blocks(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    blocks = (await acme.get(f"/conversations/{cid}/tool-blocks")).json()
    assert [(b["call_id"], b["status"], b["result_seq"]) for b in blocks] == [
        ("call_1", "complete", 4),
        ("call_2", "pending", None),
    ]
    assert blocks[0]["arguments"] == {"path": "."}
    pending = await acme.get(f"/conversations/{cid}/tool-blocks", params={"pending_only": True})
    assert [b["call_id"] for b in pending.json()] == ["call_2"]
