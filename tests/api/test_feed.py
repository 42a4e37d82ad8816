"""The event feed over HTTP: GET /events, GET /conversations/{id}/events and
the live tail GET /events/stream (Server-Sent Events), on both backends.

httpx's in-process transport returns a response only once the app has
finished it, so the endless SSE stream is read by `SSE`, a small ASGI
client: it collects the body as it is sent and, when the test is done,
sends `http.disconnect`, which ends the stream as a browser closing it would.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from store.domain.feed import MAX_FEED_LIMIT
from store.domain.feed_vector import FIRST_PARTITION, parse_position
from tests.api.conftest import TOOL_TURN, auth, new_conversation
from tests.asgi_stream import AsgiStream

PATIENCE = 30.0  # seconds: the feed trails commits while other sessions run


async def append(client: httpx.AsyncClient, cid: str, *texts: str) -> None:
    response = await client.post(
        f"/conversations/{cid}/messages",
        json={"messages": [{"role": "user", "content": t} for t in texts]},
    )
    assert response.status_code in (200, 201), response.text


async def read_all(client: httpx.AsyncClient, after: str = "0-0", **params: Any) -> list[Any]:
    """Every event the feed shows after `after`, following `next`."""
    events: list[Any] = []
    while True:
        page = (await client.get("/events", params={"after": after, **params})).json()
        events += page["events"]
        after = page["next"]
        if not page["more"]:
            return events


async def read_until(client: httpx.AsyncClient, count: int, after: str = "0-0") -> list[Any]:
    deadline = asyncio.get_running_loop().time() + PATIENCE
    while len(events := await read_all(client, after)) < count:
        assert asyncio.get_running_loop().time() < deadline, f"{len(events)} of {count}"
        await asyncio.sleep(0.05)
    return events


def base64_token(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def place(token: str) -> tuple[int, int]:
    """A checkpoint's place in the one partition a single server has."""
    position = parse_position(token).at(FIRST_PARTITION)
    return position.transaction_id, position.position


def texts(events: list[Any]) -> list[str]:
    return [e["data"]["message"]["content"] for e in events if e["type"] == "message_appended"]


# --- GET /events ------------------------------------------------------------------


async def test_the_feed_shows_only_the_keys_tenant(acme: httpx.AsyncClient, other_key: str) -> None:
    ours = await new_conversation(acme)
    globex = httpx.Headers(auth(other_key))
    response = await acme.post("/conversations", json={}, headers=globex)
    assert response.status_code == 201
    other = response.json()["id"]
    await acme.post(
        f"/conversations/{other}/messages",
        json={"messages": [{"role": "user", "content": "globex secret"}]},
        headers=globex,
    )
    await append(acme, ours, "one", "two")

    events = await read_until(acme, 3)
    assert {e["conversation_id"] for e in events} == {ours}
    assert [e["type"] for e in events] == ["conversation_started", *["message_appended"] * 2]
    assert texts(events) == ["one", "two"]

    acme.headers.update(globex)
    seen = await read_until(acme, 2)
    assert {e["conversation_id"] for e in seen} == {other}
    assert "one" not in json.dumps(seen)


async def test_pages_follow_next_in_feed_order(acme: httpx.AsyncClient) -> None:
    a = await new_conversation(acme)
    b = await new_conversation(acme)
    for i in range(5):
        await append(acme, a if i % 2 else b, f"m{i}")
    whole = await read_until(acme, 7)
    paged = await read_all(acme, limit=2)
    assert paged == whole
    assert texts(whole) == [f"m{i}" for i in range(5)]
    checkpoints = [place(e["checkpoint"]) for e in whole]
    assert checkpoints == sorted(checkpoints)

    first = (await acme.get("/events", params={"limit": 2})).json()
    assert [e["checkpoint"] for e in first["events"]] == [e["checkpoint"] for e in whole[:2]]
    assert first["next"] == whole[1]["checkpoint"]
    assert first["more"] is True
    rest = (await acme.get("/events", params={"after": first["next"], "limit": 100})).json()
    assert rest["events"] == whole[2:]
    assert rest["more"] is False
    assert rest["next"] == whole[-1]["checkpoint"]
    end = (await acme.get("/events", params={"after": rest["next"]})).json()
    assert end == {"events": [], "next": rest["next"], "more": False}


@pytest.mark.parametrize(
    "params",
    [
        {"limit": MAX_FEED_LIMIT + 1},
        {"limit": 0},
        {"after": "a b"},
        {"after": "v1.!!!"},
        {"after": "v1." + "A" * 3000},
    ],
)
async def test_bad_feed_parameters_are_422(acme: httpx.AsyncClient, params: dict[str, Any]) -> None:
    response = await acme.get("/events", params=params)
    assert response.status_code == 422, response.text
    assert response.json()["type"] == "ValidationError"


@pytest.mark.parametrize(
    ("after", "named"),
    [
        ("12", "neither a token"),
        ("a-b", "neither a token"),
        ("1-2-3", "neither a token"),
        ("1" * 20 + "-1", "out of range"),
        ("9223372036854775808-0", "out of range"),
        ("v2.MDowLTA", "version 2"),
        ("v1.A", "base64url"),
        ("v1.__8", "base64url"),  # decodes to bytes that are not text
        ("v1." + base64_token("0:1-2,0:3-4"), "twice"),
        ("v1." + base64_token("0=1-2"), "entry"),
        ("v1." + base64_token("0:1-2" + ",x:1-1" * 70), "partitions"),
        ("v1." + base64_token("0:99999999999999999999-1"), "out of range"),
        ("v1." + base64_token("eu_west:1-1"), "partition 'eu_west'"),
    ],
)
async def test_a_hostile_feed_position_is_422_naming_the_problem(
    acme: httpx.AsyncClient, after: str, named: str
) -> None:
    response = await acme.get("/events", params={"after": after})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "InvalidOperation"
    assert named in problem["detail"]


async def test_a_checkpoint_from_before_partitions_resumes_at_the_same_place(
    acme: httpx.AsyncClient,
) -> None:
    """A reader that saved a `<transaction_id>-<position>` checkpoint before
    positions became vectors reads on from the same event."""
    cid = await new_conversation(acme)
    await append(acme, cid, "a", "b", "c")
    whole = await read_until(acme, 4)
    transaction_id, position = place(whole[1]["checkpoint"])
    old = f"{transaction_id}-{position}"
    by_old = (await acme.get("/events", params={"after": old})).json()
    by_new = (await acme.get("/events", params={"after": whole[1]["checkpoint"]})).json()
    assert by_old == by_new
    assert by_old["events"] == whole[2:]


async def test_the_feed_needs_a_key(client: httpx.AsyncClient) -> None:
    for path in ("/events", "/events/stream", "/conversations/x/events"):
        assert (await client.get(path)).status_code == 401


# --- GET /conversations/{id}/events --------------------------------------------------


async def test_a_conversations_events_page_by_version(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await acme.post(f"/conversations/{cid}/messages", json={"messages": TOOL_TURN})
    page = (await acme.get(f"/conversations/{cid}/events", params={"limit": 4})).json()
    assert [e["version"] for e in page["events"]] == [1, 2, 3, 4]
    assert page["next_from_version"] == 5
    assert all(e["conversation_id"] == cid for e in page["events"])
    rest = (
        await acme.get(f"/conversations/{cid}/events", params={"from_version": 5, "limit": 4})
    ).json()
    assert [e["version"] for e in rest["events"]] == [5, 6]
    assert rest["next_from_version"] == 7
    past = (await acme.get(f"/conversations/{cid}/events", params={"from_version": 7})).json()
    assert past == {"events": [], "next_from_version": 7}


async def test_a_conversations_events_of_another_tenant_are_404(
    acme: httpx.AsyncClient, other_key: str
) -> None:
    cid = await new_conversation(acme)
    response = await acme.get(f"/conversations/{cid}/events", headers=auth(other_key))
    assert response.status_code == 404
    assert (await acme.get("/conversations/no-such-id/events")).status_code == 404


@pytest.mark.parametrize(
    "params", [{"from_version": 0}, {"limit": MAX_FEED_LIMIT + 1}, {"from_version": "x"}]
)
async def test_bad_conversation_event_parameters_are_422(
    acme: httpx.AsyncClient, params: dict[str, Any]
) -> None:
    cid = await new_conversation(acme)
    response = await acme.get(f"/conversations/{cid}/events", params=params)
    assert response.status_code == 422


async def test_the_openapi_names_the_operations(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    for path, operation_id in [
        ("/events", "readEvents"),
        ("/conversations/{conversation_id}/events", "readConversationEvents"),
        ("/events/stream", "tailEvents"),
    ]:
        operation = paths[path]["get"]
        assert operation["operationId"] == operation_id
        assert all(p.get("description") for p in operation["parameters"]), path


# --- GET /events/stream -------------------------------------------------------------------


class SSE(AsgiStream):
    """The feed's stream (`GET /events/stream`) read as it is sent."""

    def __init__(self, app: FastAPI, key: str, query: str = "", **headers: str) -> None:
        super().__init__(app, "/events/stream", key, query, **headers)

    async def until(  # type: ignore[override]
        self, done: Callable[[str], bool], *, or_end: bool = True
    ) -> str:
        """The body as text once `done(text)` holds, or the stream ended."""
        body = await super().until(lambda body: done(body.decode()), or_end=or_end)
        return body.decode()

    def events(self) -> list[dict[str, Any]]:
        """The SSE messages with data, as {id, event, data}."""
        found = []
        for block in self.body.decode().split("\n\n"):
            fields = dict(
                line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
            )
            if "data" in fields:
                found.append({**fields, "data": json.loads(fields["data"])})
        return found


def count(n: int) -> Callable[[str], bool]:
    return lambda text: text.count("\ndata: ") >= n


async def test_the_tail_sends_new_events_as_they_commit(
    app: FastAPI, acme: httpx.AsyncClient, key: str
) -> None:
    cid = await new_conversation(acme)
    await read_until(acme, 1)
    async with SSE(app, key) as stream:
        await stream.until(lambda text: ": connected" in text)
        assert stream.status == 200
        await append(acme, cid, "hello")
        await append(acme, cid, "again")
        await stream.until(count(2))
    sent = stream.events()
    assert [e["event"] for e in sent] == ["message_appended"] * 2
    assert [e["data"]["data"]["message"]["content"] for e in sent] == ["hello", "again"]
    assert [e["id"] for e in sent] == [e["data"]["checkpoint"] for e in sent]
    assert {e["data"]["conversation_id"] for e in sent} == {cid}


async def test_the_tail_resumes_after_last_event_id(
    app: FastAPI, acme: httpx.AsyncClient, key: str
) -> None:
    cid = await new_conversation(acme)
    await append(acme, cid, "a", "b", "c")
    events = await read_until(acme, 4)
    async with SSE(app, key, Last_Event_ID=events[1]["checkpoint"]) as stream:
        await stream.until(count(2))
    assert [e["id"] for e in stream.events()] == [e["checkpoint"] for e in events[2:]]

    # Last-Event-ID wins over `after` (EventSource reconnects to the same URL).
    query = f"after={events[0]['checkpoint']}"
    async with SSE(app, key, query, Last_Event_ID=events[2]["checkpoint"]) as stream:
        await stream.until(count(1))
    assert [e["id"] for e in stream.events()] == [events[3]["checkpoint"]]


async def test_the_tail_sends_heartbeats_that_move_the_resume_point(
    app: FastAPI, acme: httpx.AsyncClient, key: str
) -> None:
    async with SSE(app, key, "after=0-0&heartbeat=0.05") as stream:
        text = await stream.until(lambda text: text.count(": heartbeat") >= 2)
    assert "\nid: " in text
    assert stream.events() == []


async def test_another_tenants_tail_never_sees_the_events(
    app: FastAPI, acme: httpx.AsyncClient, key: str, other_key: str
) -> None:
    cid = await new_conversation(acme)
    async with (
        SSE(app, other_key, "after=0-0&heartbeat=0.05") as theirs,
        SSE(app, key, "after=0-0") as ours,
    ):
        await append(acme, cid, "secret")
        await ours.until(count(2))
        # Past every event of acme's: heartbeats carry checkpoints beyond them.
        last = ours.events()[-1]["id"]
        await theirs.until(lambda text: _beyond(text, last))
    assert theirs.events() == []
    assert "secret" not in theirs.body.decode()


def _beyond(text: str, checkpoint: str) -> bool:
    mark = place(checkpoint)
    ids = [line[4:] for line in text.splitlines() if line.startswith("id: ")]
    return any(place(i) >= mark for i in ids)


@pytest.mark.parametrize("query", ["after=nope", "heartbeat=0", "heartbeat=1000"])
async def test_a_bad_tail_parameter_is_422(app: FastAPI, key: str, query: str) -> None:
    async with SSE(app, key, query) as stream:
        await stream.until(lambda text: "error" in text)
    assert stream.status == 422


@pytest.mark.parametrize(
    ("last_event_id", "named"),
    [
        ("yesterday", "neither a token"),
        ("v7.MDoxLTE", "version 7"),
        ("v1." + base64_token("mars:1-1"), "partition 'mars'"),
    ],
)
async def test_a_bad_last_event_id_is_422_naming_the_problem(
    app: FastAPI, key: str, last_event_id: str, named: str
) -> None:
    async with SSE(app, key, Last_Event_ID=last_event_id) as stream:
        await stream.until(lambda text: "detail" in text)
    assert stream.status == 422
    assert named in json.loads(stream.body)["detail"]


async def test_the_tail_resumes_from_a_checkpoint_of_before_partitions(
    app: FastAPI, acme: httpx.AsyncClient, key: str
) -> None:
    cid = await new_conversation(acme)
    await append(acme, cid, "a", "b", "c")
    events = await read_until(acme, 4)
    transaction_id, position = place(events[1]["checkpoint"])
    async with SSE(app, key, Last_Event_ID=f"{transaction_id}-{position}") as stream:
        await stream.until(count(2))
    # The ids it sends are tokens, which a reconnect carries on with.
    assert [e["id"] for e in stream.events()] == [e["checkpoint"] for e in events[2:]]
