"""How a request body becomes JSON: strictly UTF-8, with clear refusals.

Every router uses `JSONRoute`. Its request parses the body as FastAPI's
does, with three differences, each a 422 `ValidationError` naming the body
instead of FastAPI's 400 "There was an error parsing the body":

- the bytes must be UTF-8. (`json.loads` on bytes decodes with
  `surrogatepass`, so an encoded lone surrogate would get through as text
  that PostgreSQL cannot store.)
- JSON nested past what the parser can recurse into is refused, not a
  RecursionError. (Nesting the store accepts is far shallower:
  `store.domain.inputs.MAX_JSON_DEPTH`.)
- a number with more digits than Python converts is refused.

`NaN`, `Infinity` and `1e400` still parse (as floats): the fields they land
in refuse them, by name (`store.domain.inputs`).

The body is parsed by orjson (strict UTF-8, its own nesting limit): a
fraction of the standard library's time for a message's text. What orjson
refuses, and a body with a run of 19 digits or more (orjson turns an
integer past 64 bits into a float, which a field would then take), is
parsed by the standard library, which gives the answers above (its
position in a syntax error; `NaN`, `1e400` and any integer parsed as they
are, to be refused by their field).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute, _get_scope_effective_route_context
from starlette.convertors import StringConvertor
from starlette.routing import Match
from starlette.types import Scope

from api.errors import CONVERSATION_ERRORS, WRITE_ERRORS, BodyRefused
from api.fast_path import Handler, eligible, lean_answer, lean_handler

# Where orjson's integers and Python's may differ: past 18 digits.
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


class JSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            if _LONG_NUMBER.search(body) is None:
                try:
                    self._json = orjson.loads(body)
                    return self._json
                except orjson.JSONDecodeError:
                    pass  # the standard library's answer, below
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as error:
                raise BodyRefused(f"not valid UTF-8 (byte {error.start})") from None
            try:
                self._json = json.loads(text)
            except RecursionError:
                raise BodyRefused("JSON nested too deeply") from None
            except json.JSONDecodeError:
                raise  # FastAPI answers it: 422 naming the position
            except ValueError:
                raise BodyRefused("a number has too many digits") from None
        return self._json


# What a route's template says of every path it matches: how it starts, how
# it ends, and how many `/`s it has (each `{parameter}` one whole segment).
Shape = tuple[str, str, int]


def template_shape(template: str, convertors: dict[str, Any]) -> Shape | None:
    """The shape of `template`'s paths, or None when a parameter may hold a
    `/` (a convertor other than the default one)."""
    if not all(isinstance(convertor, StringConvertor) for convertor in convertors.values()):
        return None
    if "{" not in template:
        return template, template, template.count("/")
    return (
        template[: template.index("{")],
        template[template.rindex("}") + 1 :],
        template.count("/"),
    )


class JSONRoute(APIRoute):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shape = template_shape(self.path, self.param_convertors)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """As FastAPI's, but a path that cannot be this route's (another start,
        end or number of segments) is turned away without its regex and look-ups:
        the router asks every route before the one that matches, and the hot
        routes are not first (docs/http-api.md, "Speed")."""
        shape = self.shape
        if (
            shape is not None
            and scope["type"] == "http"
            and not scope.get("root_path")
            and _get_scope_effective_route_context(scope) is None
        ):
            path: str = scope["path"]
            start, end, slashes = shape
            if not (path.startswith(start) and path.endswith(end) and path.count("/") == slashes):
                return Match.NONE, {}
        return super().matches(scope)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        # The lean path, which `api.direct` also calls straight from the
        # request's envelope (None: this route has FastAPI's handler alone).
        self.lean: Handler | None = lean_answer(self) if eligible(self) else None
        if self.lean is not None:
            handler = lean_handler(self.lean, handler)

        async def strict(request: Request) -> Response:
            return await handler(JSONRequest(request.scope, request.receive))

        return strict


def read_route(summary: str, operation_id: str) -> dict[str, Any]:
    """What a route that reads a conversation declares: its `summary`, the
    `operation_id` clients are generated with (stable), and the errors a
    read can answer (`CONVERSATION_ERRORS`)."""
    return {"summary": summary, "operation_id": operation_id, "responses": CONVERSATION_ERRORS}


def write_route(summary: str, operation_id: str) -> dict[str, Any]:
    """As `read_route`, for a route that writes: the errors a write can
    answer (`WRITE_ERRORS`)."""
    return {"summary": summary, "operation_id": operation_id, "responses": WRITE_ERRORS}
