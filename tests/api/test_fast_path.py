"""api.fast_path: a request that validates is answered as FastAPI's handler
answers it, and one that does not is FastAPI's to answer."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute

from api.fast_path import eligible
from tests.api.conftest import auth, new_conversation

# A Content-Type the lean path leaves to FastAPI's handler (which parses it).
WITH_CHARSET = {"Content-Type": "application/json; charset=utf-8"}


def _route(app: FastAPI, operation_id: str) -> APIRoute:
    return next(
        route
        for route in app.routes
        if isinstance(route, APIRoute) and route.operation_id == operation_id
    )


def test_the_hot_routes_take_the_lean_path_and_streams_do_not(app: FastAPI) -> None:
    for operation in ("appendMessages", "assemblePayload", "createConversation"):
        assert eligible(_route(app, operation)), operation
    assert not eligible(_route(app, "exportConversation"))


async def test_both_paths_answer_a_replay_with_the_same_bytes(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    target = f"/conversations/{cid}/messages"
    body = b'{"messages": [{"role": "user", "content": "hello"}]}'
    headers = {"Idempotency-Key": "turn-1", "Content-Type": "application/json"}
    first = await acme.post(target, content=body, headers=headers)
    lean = await acme.post(target, content=body, headers=headers)
    general = await acme.post(target, content=body, headers={**headers, **WITH_CHARSET})
    assert first.status_code == 201, first.text
    assert lean.status_code == general.status_code == 200
    assert lean.content == general.content
    assert lean.headers["content-type"] == general.headers["content-type"]


async def test_the_key_is_checked_before_the_body_on_both_paths(
    client: httpx.AsyncClient, key: str
) -> None:
    created = await client.post("/conversations", json={}, headers=auth(key))
    target = f"/conversations/{created.json()['id']}/messages"
    invalid = b'{"messages": [{"role": "nobody"}]}'
    for content_type in ("application/json", WITH_CHARSET["Content-Type"]):
        no_key = await client.post(target, content=invalid, headers={"Content-Type": content_type})
        assert no_key.status_code == 401, no_key.text
        refused = await client.post(
            target, content=invalid, headers={**auth(key), "Content-Type": content_type}
        )
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
