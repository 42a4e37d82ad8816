"""api.routes.forks: forking a conversation, pinning and unpinning messages,
and batch operations on one agent's window."""

from __future__ import annotations

import httpx

from tests.api.conftest import TOOL_TURN, auth, new_conversation


async def _session(client: httpx.AsyncClient) -> str:
    cid = await new_conversation(client)
    helper = {"role": "user", "content": "helper asks", "agent_id": "helper"}
    response = await client.post(
        f"/conversations/{cid}/messages", json={"messages": [*TOOL_TURN, helper]}
    )
    assert response.status_code == 201, response.text
    return cid


async def test_fork_copies_the_history_and_is_independent(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    response = await acme.post(
        f"/conversations/{cid}/fork",
        json={"new_conversation_id": f"{cid}-b", "up_to_seq": 4, "metadata": {"k": "v"}},
    )
    assert response.status_code == 201, response.text
    fork = response.json()
    assert (fork["id"], fork["next_seq"], fork["metadata"]) == (f"{cid}-b", 5, {"k": "v"})
    window = (await acme.get(f"/conversations/{cid}-b/window")).json()
    assert [m["seq"] for m in window] == [1, 2, 3, 4]
    appended = await acme.post(
        f"/conversations/{cid}-b/messages", json={"messages": [{"role": "user", "content": "b"}]}
    )
    assert appended.status_code == 201
    parent = (await acme.get(f"/conversations/{cid}/window")).json()
    assert [m["seq"] for m in parent] == [1, 2, 3, 4, 5, 6]

    helper = await acme.post(f"/conversations/{cid}/fork", json={"agent_id": "helper"})
    assert helper.status_code == 201, helper.text
    messages = (await acme.get(f"/conversations/{helper.json()['id']}/messages")).json()
    assert [(m["seq"], m["agent_id"]) for m in messages["items"]] == [(6, "helper")]


async def test_fork_errors(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    taken = await new_conversation(acme)

    missing = await acme.post("/conversations/nope/fork", json={})
    assert missing.status_code == 404, missing.text
    conflict = await acme.post(f"/conversations/{cid}/fork", json={"new_conversation_id": taken})
    assert conflict.status_code == 409, conflict.text
    for body, problem in [
        ({"up_to_seq": 99}, "past the parent's last message"),
        ({"up_to_seq": 0}, "up_to_seq"),
        ({"up_to_seq": "3"}, "up_to_seq"),
        ({"agent_id": "nobody"}, "no message"),
        ({"agent_id": ""}, "agent_id"),
        ({"new_conversation_id": " padded "}, "new_conversation_id"),
        ({"metadata": []}, "metadata"),
        ({"surprise": 1}, "surprise"),
    ]:
        response = await acme.post(f"/conversations/{cid}/fork", json=body)
        assert response.status_code == 422, (body, response.text)
        assert problem in response.text, (body, response.text)


async def test_pin_and_unpin(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)

    pinned = await acme.put(f"/conversations/{cid}/messages/2/pin")
    assert pinned.status_code == 200, pinned.text
    assert pinned.json() == {"conversation_id": cid, "version": 8}
    again = await acme.put(f"/conversations/{cid}/messages/2/pin")
    assert again.json()["version"] == 8
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert [m["pinned"] for m in window] == [False, True, False, False, False, False]

    stale = await acme.delete(f"/conversations/{cid}/messages/2/pin?expected_version=1")
    assert stale.status_code == 409, stale.text
    unpinned = await acme.delete(f"/conversations/{cid}/messages/2/pin?expected_version=8")
    assert unpinned.json() == {"conversation_id": cid, "version": 9}
    assert (await acme.put(f"/conversations/{cid}/messages/99/pin")).status_code == 422
    assert (await acme.put(f"/conversations/{cid}/messages/0/pin")).status_code == 422
    assert (await acme.put("/conversations/nope/messages/1/pin")).status_code == 404


async def test_another_tenant_cannot_fork_or_pin(acme: httpx.AsyncClient, other_key: str) -> None:
    cid = await _session(acme)
    globex = auth(other_key)

    fork = await acme.post(f"/conversations/{cid}/fork", json={}, headers=globex)
    assert fork.status_code == 404, fork.text
    pin = await acme.put(f"/conversations/{cid}/messages/1/pin", headers=globex)
    assert pin.status_code == 404, pin.text
    unpin = await acme.delete(f"/conversations/{cid}/messages/1/pin", headers=globex)
    assert unpin.status_code == 404, unpin.text
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert not any(m["pinned"] for m in window)


async def test_a_batch_operation_on_a_sub_agents_window(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)

    response = await acme.post(
        f"/conversations/{cid}/batches",
        json={"operation": "clear", "keep_system": False, "agent_id": "helper"},
    )
    assert response.status_code == 201, response.text
    helper = (await acme.get(f"/conversations/{cid}/window", params={"agent_id": "helper"})).json()
    main = (await acme.get(f"/conversations/{cid}/window", params={"agent_id": "main"})).json()
    assert (helper, [m["seq"] for m in main]) == ([], [1, 2, 3, 4, 5])
    batches = (await acme.get(f"/conversations/{cid}/batches")).json()
    assert [b["agent_id"] for b in batches] == [None, "helper"]
    bad = await acme.post(
        f"/conversations/{cid}/batches", json={"operation": "clear", "agent_id": "bad id\n"}
    )
    assert bad.status_code == 422, bad.text
