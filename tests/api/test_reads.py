"""api.routes.reads: window (paged), history pages, recent by role, role
ranges, counts, tool blocks."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import TOOL_TURN, assert_refused, auth, brief, new_conversation

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
    assert no_role.json()["detail"] == "query.role: Field required"
    negative = await acme.get(url, params={"role": "user", "n": -1})
    assert negative.status_code == 422
    assert negative.json()["detail"].startswith("query.n:")


async def test_role_range(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    response = await acme.get(
        f"/conversations/{cid}/roles/assistant", params={"first": 2, "last": 3}
    )
    assert [m["seq"] for m in response.json()] == [5, 7]
    backwards = await acme.get(f"/conversations/{cid}/roles/user", params={"first": 3, "last": 2})
    assert backwards.status_code == 422
    assert brief(backwards) == {
        "type": "InvalidOperation",
        "detail": "role_range needs 1 <= first <= last, got 3..2",
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
    # The main agent's last 3; the helper's window (its one message) is untouched.
    assert sum(visible.values()) == 4


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


# --- GET /messages (listMessages) and the paged window ----------------------------------------

SUB = [
    {"role": "user", "content": "sub task", "agent_id": "helper"},
    {"role": "assistant", "content": "sub answer", "agent_id": "helper"},
    {"role": "system", "content": "todo changed", "kind": "reminder"},
]


async def _with_history(client: httpx.AsyncClient) -> str:
    cid = await new_conversation(client)
    for batch in (TOOL_TURN, SUB):
        appended = await client.post(f"/conversations/{cid}/messages", json={"messages": batch})
        assert appended.status_code == 201, appended.text
    return cid


async def _seqs(client: httpx.AsyncClient, cid: str, **params: Any) -> list[int]:
    response = await client.get(f"/conversations/{cid}/messages", params=params)
    assert response.status_code == 200, response.text
    return [m["seq"] for m in response.json()["items"]]


async def test_list_messages_pages_both_ways(acme: httpx.AsyncClient) -> None:
    cid = await _with_history(acme)
    first = (await acme.get(f"/conversations/{cid}/messages", params={"limit": 3})).json()
    assert [m["seq"] for m in first["items"]] == [1, 2, 3]
    assert first["next_after_seq"] == 3
    assert first["next_before_seq"] is None
    rest = await _seqs(acme, cid, after_seq=3, limit=10)
    assert rest == [4, 5, 6, 7, 8]
    last = (
        await acme.get(f"/conversations/{cid}/messages", params={"order": "desc", "limit": 2})
    ).json()
    assert [m["seq"] for m in last["items"]] == [8, 7]
    assert last["next_before_seq"] == 7
    assert await _seqs(acme, cid, order="desc", before_seq=7, limit=100) == [6, 5, 4, 3, 2, 1]
    whole = (await acme.get(f"/conversations/{cid}/messages", params={"limit": 8})).json()
    assert whole["next_after_seq"] is None


async def test_list_messages_filters_and_scope(acme: httpx.AsyncClient) -> None:
    cid = await _with_history(acme)
    assert await _seqs(acme, cid, role="assistant") == [3, 5, 7]
    assert await _seqs(acme, cid, agent_id="helper") == [6, 7]
    assert await _seqs(acme, cid, kind="reminder") == [8]
    assert await _seqs(acme, cid, role="user", agent_id="helper") == [6]
    assert await _seqs(acme, cid, role="assistant", order="desc", limit=1) == [7]
    # Only the last two main messages stay visible after a truncation.
    truncated = await acme.post(
        f"/conversations/{cid}/batches",
        json={"operation": "clear", "keep_system": True},
    )
    assert truncated.status_code == 201, truncated.text
    visible = await _seqs(acme, cid, scope="visible")
    assert visible == [m["seq"] for m in (await acme.get(f"/conversations/{cid}/window")).json()]
    assert await _seqs(acme, cid, scope="history") == list(range(1, 9))


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"limit": 0}, "query.limit"),
        ({"limit": 1001}, "query.limit"),
        ({"after_seq": -1}, "query.after_seq"),
        ({"before_seq": 2**63}, "query.before_seq"),
        ({"order": "up"}, "query.order"),
        ({"role": "robot"}, "query.role"),
        ({"kind": "chatter"}, "query.kind"),
        ({"scope": "all"}, "query.scope"),
        ({"agent_id": "x" * 101}, "query.agent_id"),
    ],
)
async def test_list_messages_refuses_hostile_parameters(
    acme: httpx.AsyncClient, params: dict[str, Any], problem: str
) -> None:
    cid = await new_conversation(acme)
    assert_refused(await acme.get(f"/conversations/{cid}/messages", params=params), problem)


async def test_another_tenants_history_is_a_404(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    cid = await _with_history(client)
    for path in ("messages", "window"):
        response = await client.get(f"/conversations/{cid}/{path}", headers=auth(other_key))
        assert response.status_code == 404


async def test_the_window_comes_in_pages(acme: httpx.AsyncClient) -> None:
    cid = await _with_history(acme)
    whole = [m["seq"] for m in (await acme.get(f"/conversations/{cid}/window")).json()]
    seen: list[int] = []
    params: dict[str, Any] = {"limit": 3}
    while True:
        response = await acme.get(f"/conversations/{cid}/window", params=params)
        assert response.status_code == 200
        seen += [m["seq"] for m in response.json()]
        cursor = response.headers.get("X-Next-Cursor")
        if cursor is None:
            break
        params = {"limit": 3, "cursor": cursor}
    assert seen == whole
    for bad in ("%%%", "AAAA", "W10", "x" * 401):
        refused = await acme.get(f"/conversations/{cid}/window", params={"cursor": bad})
        assert refused.status_code == 422, bad
    assert (
        await acme.get(f"/conversations/{cid}/window", params={"limit": 1001})
    ).status_code == 422
