"""ASGI middleware: the request's envelope, what happens to every HTTP
request around its route, in one ASGI layer (`RequestEnvelope`).

From the outside in, in this order:

    identity     an id for the request (`X-Request-ID`: the client's, if it
                 is a sane one, else a new one), echoed in the response and
                 on every log line; one access line per request (method,
                 route path, status, duration), and the same counted in
                 `api.metrics` when given one
    CORS         Starlette's `CORSMiddleware`, when origins are configured
    compression  Starlette's `GZipMiddleware` for a client that sends
                 `Accept-Encoding: gzip`; for one that does not, a pass-through
                 that answers what Starlette's identity responder answers
                 (a large or streamed body gets `Vary: Accept-Encoding`)
    catch-all    an exception no handler took becomes a JSON 500, sent as
                 an ordinary response (`api.errors`, "A bug's 500")
    limits       a URL whose %-escapes are not UTF-8 is a 422; a body over
                 `max_body_bytes` is a 413, refused on its Content-Length
                 before a byte is read, or, sent without one, as soon as
                 the bytes received pass the limit
    consistency  the client's `Convo-Consistency` token read into the
                 request's `replicas.Consistency` (a 422 if it is not an
                 LSN), and the position of the request's writes answered
                 (`api.consistency`)

These were six ASGI layers, each a coroutine, a wrapped `send` and a parse
of the request's headers per request, and gzip's identity responder an
object and a normalization of its excluded types per request (what they
cost: docs/http-api.md, "Speed").
Here the headers are read once, and the three inner steps are one
coroutine with one wrapped `send`. Every non-HTTP scope (the lifespan, a
websocket) goes straight to the app, as each layer passed it on before.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from starlette.datastructures import MutableHeaders
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.gzip import GZipMiddleware, IdentityResponder
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.consistency import CONSISTENCY_HEADER
from api.direct import DirectRoutes, direct_routes
from api.errors import BodyTooLarge, internal_error_response, log_unhandled, route_path
from api.logging import request_id
from api.metrics import Metrics, metric_route
from api.problems import problem_response
from store.postgres.replicas import Consistency, format_lsn, parse_lsn, read_after

REQUEST_ID_HEADER = "X-Request-ID"
MAX_REQUEST_ID_CHARS = 200

ESCAPED_SLASH = "\x00"
"""What an escaped `/` (`%2F`) inside a path segment becomes for routing:
a conversation id may contain `/` ("team/alice"); sent as `team%2Falice`
it must stay one segment. `api.schemas.ConversationIdPath` turns it back
into `/` (an id never contains this character: ids are printable)."""

_access = logging.getLogger("convo.access")

# The request headers the envelope reads, as uvicorn hands them (lower case).
_REQUEST_ID = REQUEST_ID_HEADER.lower().encode()
_ACCEPT_ENCODING = b"accept-encoding"
_CONTENT_LENGTH = b"content-length"
_CONSISTENCY = CONSISTENCY_HEADER.lower().encode()
_READ = frozenset({_REQUEST_ID, _ACCEPT_ENCODING, _CONTENT_LENGTH, _CONSISTENCY})


@dataclass(frozen=True, kw_only=True)
class Compression:
    """gzip for a response of at least `min_bytes`, at `level`."""

    min_bytes: int
    level: int


@dataclass(frozen=True, kw_only=True)
class Cors:
    """`CORSMiddleware`'s arguments."""

    allow_origins: Collection[str]
    allow_methods: Collection[str]
    allow_headers: Collection[str]
    expose_headers: Collection[str]


def _headers_read(scope: Scope) -> dict[bytes, bytes]:
    """The first value of each header the envelope reads, as Starlette's
    `Headers.get` finds it, in one pass over the request's headers."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in _READ and name not in found:
            found[name] = value
    return found


def _request_id(given: bytes | None) -> str:
    """The client's `X-Request-ID`, if it is 1–200 visible ASCII characters,
    else a new one."""
    if given:
        value = given.decode("latin-1")
        if len(value) <= MAX_REQUEST_ID_CHARS and all("!" <= c <= "~" for c in value):
            return value
    return uuid.uuid4().hex


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


def _escapes_problem(raw: bytes) -> str | None:
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return "its %-escapes are not UTF-8"
    return None


def _with_escaped_slashes(raw_path: bytes) -> str:
    """The decoded path, with each segment's own `/`s kept out of routing."""
    return "/".join(
        unquote_to_bytes(segment).decode().replace("/", ESCAPED_SLASH)
        for segment in raw_path.split(b"/")
    )


class _Identity:
    """The response to a client that does not accept gzip: as Starlette's
    `IdentityResponder` sends it. A body under the minimum, sent whole, goes
    out untouched (what the responder does with it); anything else — a
    large or streamed body, any other message — is handed to a responder
    of Starlette's, which decides its headers as it always did."""

    __slots__ = ("minimum", "responder", "send", "start")

    def __init__(self, send: Send, minimum: int) -> None:
        self.send = send
        self.minimum = minimum
        self.start: Message | None = None
        self.responder: IdentityResponder | None = None

    async def __call__(self, message: Message) -> None:
        if self.responder is not None:
            await self.responder.send_with_compression(message)
            return
        kind = message["type"]
        if kind == "http.response.start" and self.start is None:
            self.start = message  # held, as the responder holds it, until the body
            return
        start = self.start
        if (
            start is not None
            and kind == "http.response.body"
            and not message.get("more_body", False)
            and len(message.get("body", b"")) < self.minimum
        ):
            self.start = None
            await self.send(start)
            await self.send(message)
            return
        responder = self.responder = IdentityResponder(_never_called, self.minimum)
        responder.send = self.send
        if start is not None:
            await responder.send_with_compression(start)
        await responder.send_with_compression(message)


async def _never_called(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("the identity responder only handles sent messages")


class RequestEnvelope:
    """Everything a request goes through around the app (see the module's docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics | None = None,
        max_body_bytes: int | None = None,
        compression: Compression | None = None,
        cors: Cors | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.compression = compression
        inner: ASGIApp = self._guarded
        if compression is not None:
            self.gzip = GZipMiddleware(
                self._guarded, minimum_size=compression.min_bytes, compresslevel=compression.level
            )
            inner = self._compressed
        if cors is not None:
            inner = CORSMiddleware(
                inner,
                allow_origins=cors.allow_origins,
                allow_methods=cors.allow_methods,
                allow_headers=cors.allow_headers,
                expose_headers=cors.expose_headers,
            )
        self.inner = inner
        # Built at the first request, when the app's routes are all there.
        self.direct: DirectRoutes | None = None
        self.direct_built = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        read = scope["convo.headers"] = _headers_read(scope)
        rid = _request_id(read.get(_REQUEST_ID))
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
            await self.inner(scope, receive, sending)
        finally:
            elapsed = time.perf_counter() - started
            if self.metrics is not None:
                self.metrics.observe_request(scope["method"], metric_route(scope), status, elapsed)
            if _access.isEnabledFor(logging.INFO):
                _log_access(scope, status, elapsed)
            request_id.reset(token)

    async def _compressed(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.compression is not None
        accepted = scope["convo.headers"].get(_ACCEPT_ENCODING, b"")
        if b"gzip" in accepted:
            await self.gzip(scope, receive, send)
        else:
            await self._guarded(scope, receive, _Identity(send, self.compression.min_bytes))

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The catch-all, the limits and the consistency token."""
        response_started = False
        consistency: Consistency | None = None

        async def sending(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                if consistency is not None and consistency.written is not None:
                    MutableHeaders(scope=message)[CONSISTENCY_HEADER] = format_lsn(
                        consistency.written
                    )
            await send(message)

        outer = scope  # what the catch-all logs: the request as it came
        try:
            read: dict[bytes, bytes] = scope["convo.headers"]
            raw_path = (scope.get("raw_path") or b"").split(b"?", 1)[0]
            for part, raw in (("path", raw_path), ("query", scope.get("query_string", b""))):
                if problem := _escapes_problem(raw):
                    response = problem_response(
                        422,
                        "ValidationError",
                        f"{part}: {problem}",
                        errors=[{"pointer": f"/{part}", "detail": problem}],
                    )
                    await response(scope, receive, sending)
                    return
            if b"%2f" in raw_path.lower():
                scope = {**scope, "path": _with_escaped_slashes(raw_path)}
            limit = self.max_body_bytes
            body = receive
            if limit is not None:
                declared = read.get(_CONTENT_LENGTH)
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    await BodyTooLarge(limit).response()(scope, receive, sending)
                    return
                body = _counting(receive, limit)
            given = read.get(_CONSISTENCY)
            try:
                after = None if given is None else parse_lsn(given.decode("latin-1").strip())
            except ValueError as error:
                detail = f"{CONSISTENCY_HEADER}: {error}"
                pointer = {"pointer": f"/headers/{CONSISTENCY_HEADER}", "detail": str(error)}
                await problem_response(422, "ValidationError", detail, errors=[pointer])(
                    scope, body, sending
                )
                return
            with read_after(after) as consistency:
                await self._routed(scope, body, sending)
        except Exception as error:
            log_unhandled(error, outer)
            if response_started:
                raise  # half a response went out: only closing the connection is honest
            await internal_error_response()(outer, receive, send)

    async def _routed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route's answer: a lean route's from here (`api.direct`),
        any other through the rest of FastAPI's stack."""
        if not self.direct_built:
            self.direct = direct_routes(scope.get("app"), self.app)
            self.direct_built = True
        routes = self.direct
        if routes is not None and (found := routes.find(scope)) is not None:
            await routes.answer(found, scope, receive, send, self.app)
        else:
            await self.app(scope, receive, send)


def _counting(receive: Receive, limit: int) -> Receive:
    """`receive`, refusing the body (413) once its bytes pass `limit`."""
    received = 0

    async def counting() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge(limit)
        return message

    return counting
