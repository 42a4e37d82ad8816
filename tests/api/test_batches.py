"""api.routes.batches: every batch operation through one discriminated body."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.conftest import TOOL_TURN, new_conversation, run_batch_operation

MORE = [{"role": "user", "content": "thanks"}, {"role": "assistant", "content": "welcome"}]


async def _session(client: httpx.AsyncClient) -> str:
    cid = await new_conversation(client)
    response = await client.post(
        f"/conversations/{cid}/messages", json={"messages": [*TOOL_TURN, *MORE]}
    )
    assert response.status_code == 201
    return cid


async def _seqs(client: httpx.AsyncClient, cid: str, **params: Any) -> list[int]:
    response = await client.get(f"/conversations/{cid}/window", params=params)
    assert response.status_code == 200, response.text
    return [m["seq"] for m in response.json()]


async def test_truncate_starts_a_batch_and_the_old_one_stays_readable(
    acme: httpx.AsyncClient,
) -> None:
    cid = await _session(acme)
    response = await run_batch_operation(acme, cid, operation="truncate", keep_last=2)
    assert response.status_code == 201, response.text
    result = response.json()
    assert result == {"conversation_id": cid, "version": 9, "batch": 2, "visible": 2}
    assert await _seqs(acme, cid) == [6, 7]
    assert await _seqs(acme, cid, batch=1) == [1, 2, 3, 4, 5, 6, 7]


async def test_a_boundary_inside_a_tool_block_is_refused_unless_adjusted(
    acme: httpx.AsyncClient,
) -> None:
    cid = await _session(acme)
    refused = await run_batch_operation(acme, cid, operation="start_batch", boundary_seq=4)
    assert refused.status_code == 422
    assert refused.json()["type"] == "BoundaryError"
    assert "call_1" in refused.json()["detail"]
    assert (await acme.get(f"/conversations/{cid}")).json()["current_batch"] == 1

    adjusted = await run_batch_operation(
        acme, cid, operation="start_batch", boundary_seq=4, adjust=True
    )
    assert adjusted.status_code == 201, adjusted.text
    assert 3 in await _seqs(acme, cid)  # the call moved in with its result


async def test_start_batch_with_a_summary(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    response = await run_batch_operation(
        acme,
        cid,
        operation="start_batch",
        boundary_seq=6,
        retain=[1],
        summary={"role": "user", "content": "Earlier: listed two files."},
    )
    assert response.status_code == 201, response.text
    window = (await acme.get(f"/conversations/{cid}/window")).json()
    assert [(m["seq"], m["kind"]) for m in window] == [
        (1, "output"),
        (8, "summary"),
        (6, "input"),
        (7, "output"),
    ]


async def test_filter_clear_insert_and_rollback(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    filtered = await run_batch_operation(acme, cid, operation="filter", roles=["system", "user"])
    assert filtered.status_code == 201, filtered.text
    assert await _seqs(acme, cid) == [1, 2, 6]

    cleared = await run_batch_operation(acme, cid, operation="clear", keep_system=True)
    assert cleared.status_code == 201
    assert await _seqs(acme, cid) == [1]

    inserted = await run_batch_operation(
        acme, cid, operation="insert", position=1, messages=[{"role": "user", "content": "hi"}]
    )
    assert inserted.status_code == 201, inserted.text
    assert inserted.json()["batch"] == 4
    assert await _seqs(acme, cid) == [1, 8]

    rolled = await run_batch_operation(acme, cid, operation="rollback_to_batch", batch=1)
    assert rolled.status_code == 201
    assert rolled.json()["batch"] == 5
    assert await _seqs(acme, cid) == [1, 2, 3, 4, 5, 6, 7]

    batches = (await acme.get(f"/conversations/{cid}/batches")).json()
    assert [(b["number"], b["operation"]) for b in batches] == [
        (1, "conversation_started"),
        (2, "filter"),
        (3, "clear"),
        (4, "insert"),
        (5, "rollback_to_batch"),
    ]
    in_batch_4 = (await acme.get(f"/conversations/{cid}/batches/4/messages")).json()
    assert [m["content"] for m in in_batch_4] == ["hi"]


async def test_batch_operation_errors(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    unknown = await run_batch_operation(acme, cid, operation="shuffle")
    assert unknown.status_code == 422
    assert unknown.json()["type"] == "ValidationError"
    assert "shuffle" in unknown.json()["detail"]

    no_batch = await run_batch_operation(acme, cid, operation="rollback_to_batch", batch=9)
    assert no_batch.status_code == 422
    assert no_batch.json()["detail"] == ("there is no batch 9 to roll back to: batches are 1..1")

    stale = await run_batch_operation(acme, cid, operation="clear", expected_version=1)
    assert stale.status_code == 409
    assert (stale.json()["expected"], stale.json()["actual"]) == (1, 8)

    not_adjustable = await run_batch_operation(
        acme, cid, operation="insert", position=0, messages=[], adjust=True
    )
    assert not_adjustable.status_code == 422
    assert "body.insert.adjust" in not_adjustable.json()["detail"]
    assert len(await _seqs(acme, cid)) == 7


async def test_a_body_is_refused_as_its_value_is(acme: httpx.AsyncClient) -> None:
    cid = await _session(acme)
    refusals: dict[str, dict[str, Any]] = {
        "body.truncate: truncate takes one form: keep_first, keep_last, range, or "
        "remove_first and/or remove_last; got keep_first and keep_last": {
            "operation": "truncate",
            "keep_first": 1,
            "keep_last": 1,
        },
        "body.truncate.range: start must not be after end, got [3, 1]": {
            "operation": "truncate",
            "range": [3, 1],
        },
        "body.filter: filter needs roles, content_contains or content_excludes": {
            "operation": "filter"
        },
        "body.filter.roles: unknown roles ['robot']": {"operation": "filter", "roles": ["robot"]},
        "body.start_batch.boundary_seq: seqs count from 1, got 0": {
            "operation": "start_batch",
            "boundary_seq": 0,
        },
        "body.insert.position: -1 is outside the window": {
            "operation": "insert",
            "position": -1,
            "messages": [{"role": "user", "content": "hi"}],
        },
        "body.rollback_to_batch.batch: there is no batch 0 to roll back to": {
            "operation": "rollback_to_batch",
            "batch": 0,
        },
    }
    for message, body in refusals.items():
        response = await run_batch_operation(acme, cid, **body)
        assert response.status_code == 422, body
        assert response.json()["type"] == "ValidationError"
        assert message in response.json()["detail"]
    assert (await acme.get(f"/conversations/{cid}")).json()["version"] == 8


async def test_what_needs_the_conversation_is_refused_when_it_runs(
    acme: httpx.AsyncClient,
) -> None:
    cid = await _session(acme)  # messages 1..7
    past_the_end = await run_batch_operation(acme, cid, operation="start_batch", boundary_seq=9)
    assert past_the_end.status_code == 422
    error = past_the_end.json()
    assert (error["type"], error["detail"]) == (
        "InvalidOperation",
        "start_batch boundary_seq 9 is past the end of the conversation: it must "
        "be between 1 and 8 (the next message's seq)",
    )
    outside = await run_batch_operation(
        acme, cid, operation="insert", position=8, messages=[{"role": "user", "content": "x"}]
    )
    assert outside.status_code == 422
    assert outside.json()["detail"] == "insert position 8 is outside the window (0..7)"
    assert (await acme.get(f"/conversations/{cid}")).json()["version"] == 8
