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
from fastapi.routing import APIRoute

from api.errors import CONVERSATION_ERRORS, WRITE_ERRORS, BodyRefused
from api.fast_path import eligible, lean_handler

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


class JSONRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if eligible(self):
            handler = lean_handler(self, handler)

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
