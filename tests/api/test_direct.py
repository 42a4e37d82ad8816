"""api.direct: a lean route is answered from the request's envelope, and
every answer is the one the whole stack gives.

The oracle: one sequence of requests (writes that succeed, retries,
conflicts, each kind of refusal, bodies the lean path leaves to FastAPI,
paths only the router answers) sent to two apps on the in-memory storage,
one answering lean routes from the envelope and one with that turned off.
Statuses, headers and bodies must be the same, but for the times stored.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.middleware.exceptions import ExceptionMiddleware

from api.direct import direct_routes
from api.middleware import RequestEnvelope
from hosting.keys import READ_ONLY
from hosting.settings import Settings
from tests.api.conftest import BASE_URL, in_memory_app

JSON = {"Content-Type": "application/json"}
WITH_CHARSET = {"Content-Type": "application/json; charset=utf-8"}
MESSAGE = b'{"messages": [{"role": "user", "content": "hello"}]}'

# (method, path, body, headers beyond the key's; "key": None sends none,
# "read-only" the tenant's read-only key, "unknown" a key nobody made)
REQUESTS: list[tuple[str, str, bytes | None, dict[str, str]]] = [
    ("POST", "/conversations", b'{"id": "c1"}', JSON),
    ("POST", "/conversations", b'{"id": "team/alice"}', JSON),
    ("POST", "/conversations", b'{"id": "c1"}', JSON),  # exists: 409
    ("POST", "/conversations/c1/messages", MESSAGE, JSON),
    ("POST", "/conversations/c1/messages", MESSAGE, {**JSON, "Idempotency-Key": "t-1"}),
    ("POST", "/conversations/c1/messages", MESSAGE, {**JSON, "Idempotency-Key": "t-1"}),
    ("POST", "/conversations/c1/messages", MESSAGE, {**JSON, "Idempotency-Key": ""}),
    (
        "POST",
        "/conversations/c1/messages",
        b'{"messages": [{"role": "user", "content": "x"}], "expected_version": 1}',
        JSON,
    ),
    ("POST", "/conversations/nobody/messages", MESSAGE, JSON),
    ("POST", "/conversations/c1/messages", b'{"messages": [{"role": "nobody"}]}', JSON),
    ("POST", "/conversations/c1/messages", b'{"messages": [', JSON),
    ("POST", "/conversations/c1/messages", b"", JSON),
    ("POST", "/conversations/c1/messages", MESSAGE, WITH_CHARSET),
    ("POST", "/conversations/c1/messages", MESSAGE, {"Content-Type": "text/plain"}),
    ("POST", "/conversations/c1/messages", MESSAGE, {**JSON, "key": "none"}),
    ("POST", "/conversations/c1/messages", MESSAGE, {**JSON, "key": "unknown"}),
    ("POST", "/conversations/c1/messages", MESSAGE, {**JSON, "key": "read-only"}),
    ("POST", "/conversations/team%2Falice/messages", MESSAGE, JSON),
    ("POST", "/conversations/c1/messages/", MESSAGE, JSON),
    ("POST", "/conversations/" + "x" * 300 + "/messages", MESSAGE, JSON),
    ("PUT", "/conversations/c1/messages/1", b'{"content": "edited"}', JSON),
    ("PUT", "/conversations/c1/messages/0", b'{"content": "edited"}', JSON),
    ("POST", "/conversations/c1/assemble", b'{"format": "openai-chat"}', JSON),
    (
        "POST",
        "/conversations/c1/assemble",
        b'{"format": "openai-chat"}',
        {**JSON, "key": "read-only"},
    ),
    ("POST", "/conversations/c1/assemble", b'{"format": "no-such-format"}', JSON),
    ("GET", "/conversations/c1", None, {}),
    ("HEAD", "/conversations/c1", None, {}),
    ("GET", "/conversations/c1/messages?limit=2", None, {}),
    ("GET", "/conversations/c1/messages?limit=-1", None, {}),
    ("DELETE", "/conversations/c1/messages", None, {}),
    ("GET", "/conversations/c1/export", None, {}),
    ("GET", "/no/such/route", None, {}),
]

# Values that differ between two runs of the same requests: times.
_TIME = re.compile(rb'"\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)?"')
_VARYING_HEADERS = {"date"}


async def _answers(direct: bool) -> list[tuple[int, list[tuple[str, str]], bytes]]:
    app, keys = in_memory_app(Settings())
    sent = {
        "write": keys.create("acme", "tests"),
        "read-only": keys.create("acme", "tests", scope=READ_ONLY),
        "unknown": "cs_" + "0" * 40,
    }
    answers = []
    async with _client(app) as client:
        await client.get("/health")  # the middleware stack is built at the first request
        if not direct:
            _envelope(app).direct = None
        for number, (method, path, body, given) in enumerate(REQUESTS):
            headers = {name: value for name, value in given.items() if name != "key"}
            which = given.get("key", "write")
            if which != "none":
                headers["Authorization"] = f"Bearer {sent[which]}"
            headers["X-Request-ID"] = f"request-{number}"
            response = await client.request(method, path, content=body, headers=headers)
            kept = [(n, v) for n, v in response.headers.items() if n not in _VARYING_HEADERS]
            answers.append((response.status_code, kept, _TIME.sub(b'"<time>"', response.content)))
    return answers


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL)


def _envelope(app: FastAPI) -> RequestEnvelope:
    layer: Any = app.middleware_stack
    while not isinstance(layer, RequestEnvelope):
        layer = layer.app
    return layer


async def test_every_answer_is_the_whole_stacks() -> None:
    direct, stacked = await _answers(direct=True), await _answers(direct=False)
    for (method, path, _, given), one, other in zip(REQUESTS, direct, stacked, strict=True):
        assert one == other, (method, path, given)
    statuses = {status for status, _, _ in direct}
    assert {200, 201, 401, 403, 404, 409, 422}.issubset(statuses), statuses


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests that went through the stack past the envelope."""
    passed: list[str] = []
    original = ExceptionMiddleware.__call__

    async def counting(self: ExceptionMiddleware, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            passed.append(scope["path"])
        await original(self, scope, receive, send)

    monkeypatch.setattr(ExceptionMiddleware, "__call__", counting)
    return passed


async def test_a_lean_route_skips_the_stack_and_a_fallback_takes_it(counted: list[str]) -> None:
    app, keys = in_memory_app(Settings())
    headers = {"Authorization": f"Bearer {keys.create('acme', 'tests')}", **JSON}
    async with _client(app) as client:
        created = await client.post("/conversations", content=b'{"id": "c1"}', headers=headers)
        appended = await client.post("/conversations/c1/messages", content=MESSAGE, headers=headers)
        assert (created.status_code, appended.status_code) == (201, 201)
        assert counted == []
        refused = await client.post(
            "/conversations/c1/messages", content=b'{"messages": 1}', headers=headers
        )
        assert refused.status_code == 422
        assert refused.json()["errors"][0]["pointer"] == "/body/messages"
        assert counted == ["/conversations/c1/messages"]
        exported = await client.get("/conversations/c1/export", headers=headers)
        assert exported.status_code == 200
        assert counted[-1] == "/conversations/c1/export"


async def test_an_error_no_handler_takes_is_the_catch_alls_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, keys = in_memory_app(Settings())
    headers = {"Authorization": f"Bearer {keys.create('acme', 'tests')}", **JSON}

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    async with _client(app) as client:
        await client.post("/conversations", content=b'{"id": "c1"}', headers=headers)
        monkeypatch.setattr("store.repository.Repository.append_messages", broken)
        response = await client.post("/conversations/c1/messages", content=MESSAGE, headers=headers)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
def test_the_route_found_is_the_routers_choice(app: FastAPI, method: str) -> None:
    """For some 900 paths: the lean route `find` answers with is the first
    route the router's walk matches in full, and a path it leaves alone is
    one whose first full match has no lean path (or none matches)."""
    from starlette.routing import Match

    from tests.api.test_routing import _paths, _scope

    routes = direct_routes(app, ExceptionMiddleware(app.router))
    assert routes is not None
    for path in _paths(app):
        chosen = next(
            (r for r in app.routes if r.matches(_scope(path, method))[0] is Match.FULL), None
        )
        found = routes.find(_scope(path, method))
        expected = chosen if getattr(chosen, "lean", None) is not None else None
        assert (found.route if found else None) is expected, (method, path)
