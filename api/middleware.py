"""ASGI middleware: what happens to every request before and after a route.

From the outside in (`api.app.create_app` adds them in this order):

    RequestContext   an id for the request (`X-Request-ID`: the client's, if
                     it is a sane one, else a new one), echoed in the
                     response and on every log line; one access line per
                     request (method, route path, status, duration), and
                     the same counted in `api.metrics` when given one
    CatchAll         (`api.errors`) an exception no handler took becomes a
                     JSON 500, sent as an ordinary response
    RequestLimits    a URL whose %-escapes are not UTF-8 is a 422; a body
                     over `max_body_bytes` is a 413, refused on its
                     Content-Length before a byte is read, or, sent without
                     one, as soon as the bytes received pass the limit
"""

from __future__ import annotations

import logging
import time
import uuid
from urllib.parse import unquote_to_bytes

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.asgi import HttpMiddleware
from api.errors import BodyTooLarge, route_path
from api.logging import request_id
from api.metrics import Metrics, metric_route
from api.problems import problem_response

REQUEST_ID_HEADER = "X-Request-ID"
MAX_REQUEST_ID_CHARS = 200

_access = logging.getLogger("convo.access")


def _client_request_id(scope: Scope) -> str | None:
    """The client's `X-Request-ID`, if it is 1–200 visible ASCII characters."""
    value = Headers(scope=scope).get(REQUEST_ID_HEADER)
    if value and len(value) <= MAX_REQUEST_ID_CHARS and all("!" <= c <= "~" for c in value):
        return value
    return None


def _log_access(scope: Scope, status: int, elapsed: float) -> None:
    """The request's access line. Made with `makeRecord` and handed to
    `handle`, as `Logger.info` does, but without its look for the caller's
    file and line up the stack, which no line of ours prints and which was
    a large share of the line's cost (docs/http-api.md, "Speed")."""
    method = scope["method"]
    path = route_path(scope)
    _access.handle(
        _access.makeRecord(
            _access.name,
            logging.INFO,
            __file__,
            0,
            "%s %s %s",
            (method, path, status),
            None,
            extra={
                "method": method,
                "path": path,
                "status": status,
                "duration_ms": round(elapsed * 1000, 1),
            },
        )
    )


class RequestContext(HttpMiddleware):
    def __init__(self, app: ASGIApp, *, metrics: Metrics | None = None) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        rid = _client_request_id(scope) or uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = rid
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            elapsed = time.perf_counter() - started
            if self.metrics is not None:
                self.metrics.observe_request(scope["method"], metric_route(scope), status, elapsed)
            if _access.isEnabledFor(logging.INFO):
                _log_access(scope, status, elapsed)
            request_id.reset(token)


def _escapes_problem(raw: bytes) -> str | None:
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return "its %-escapes are not UTF-8"
    return None


ESCAPED_SLASH = "\x00"
"""What an escaped `/` (`%2F`) inside a path segment becomes for routing:
a conversation id may contain `/` ("team/alice"); sent as `team%2Falice`
it must stay one segment. `api.schemas.ConversationIdPath` turns it back
into `/` (an id never contains this character: ids are printable)."""


def _with_escaped_slashes(raw_path: bytes) -> str:
    """The decoded path, with each segment's own `/`s kept out of routing."""
    return "/".join(
        unquote_to_bytes(segment).decode().replace("/", ESCAPED_SLASH)
        for segment in raw_path.split(b"/")
    )


class RequestLimits(HttpMiddleware):
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        super().__init__(app)
        self.max_body_bytes = max_body_bytes

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_path = (scope.get("raw_path") or b"").split(b"?", 1)[0]
        for part, raw in (("path", raw_path), ("query", scope.get("query_string", b""))):
            if problem := _escapes_problem(raw):
                response = problem_response(
                    422,
                    "ValidationError",
                    f"{part}: {problem}",
                    errors=[{"pointer": f"/{part}", "detail": problem}],
                )
                await response(scope, receive, send)
                return
        if b"%2f" in raw_path.lower():
            scope = {**scope, "path": _with_escaped_slashes(raw_path)}
        limit = self.max_body_bytes
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await BodyTooLarge(limit).response()(scope, receive, send)
            return
        received = 0

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counting, send)
