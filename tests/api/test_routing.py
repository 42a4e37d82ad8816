"""api.routing: a route turns away, without its regex, only paths its
template could never match: every route answers every path as FastAPI's
own matching does."""

from __future__ import annotations

import itertools

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import Scope

from api.middleware import ESCAPED_SLASH
from api.routing import JSONRoute, template_shape

SEGMENTS = ("conversations", "c1", "messages", "assemble", "agents", "a", "", "window", "x y")


def _paths(app: FastAPI) -> list[str]:
    filled = [
        route.path.replace("{conversation_id}", "c1").replace("{agent_id}", "a")
        for route in app.routes
        if isinstance(route, APIRoute)
    ]
    made = [
        "/" + "/".join(parts) for n in range(4) for parts in itertools.product(SEGMENTS, repeat=n)
    ]
    odd = [
        "",
        "/",
        "//",
        "/conversations/",
        "/conversations//messages",
        f"/conversations/t{ESCAPED_SLASH}a",
    ]
    return [*filled, *made, *odd, *(path + "/" for path in filled)]


def _scope(path: str, method: str) -> Scope:
    return {"type": "http", "path": path, "method": method, "root_path": ""}


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_every_route_matches_every_path_as_fastapi_does(app: FastAPI, method: str) -> None:
    routes = [route for route in app.routes if isinstance(route, JSONRoute)]
    assert any(route.shape is not None for route in routes)
    for route in routes:
        for path in _paths(app):
            scope = _scope(path, method)
            ours = route.matches(dict(scope))
            fastapis = APIRoute.matches(route, dict(scope))
            assert ours == fastapis, (route.path, path)


def test_a_parameter_that_may_hold_a_slash_has_no_shape() -> None:
    assert template_shape("/files/{name:path}", {"name": object()}) is None
