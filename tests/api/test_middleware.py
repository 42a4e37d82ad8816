"""api.middleware: the request's envelope, one ASGI layer, answers what the
separate layers it replaced answered (tests/api as a whole holds the
routes; here, what the layer alone decides)."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import Message, Receive, Scope, Send

from api.middleware import Compression, RequestEnvelope

MINIMUM = 500


def _scope(headers: list[tuple[bytes, bytes]], *, path: str = "/x") -> Scope:
    return {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
    }


def _app(messages: list[Message]) -> Any:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        for message in messages:
            await send({**message, "headers": list(message.get("headers", []))})

    return app


async def _sent(app: Any, scope: Scope) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def _start(content_type: bytes = b"application/json", **extra: Any) -> Message:
    headers = [(b"content-type", content_type), *extra.pop("headers", [])]
    return {"type": "http.response.start", "status": extra.pop("status", 200), "headers": headers}


def _body(size: int, *, more: bool = False) -> Message:
    return {"type": "http.response.body", "body": b"x" * size, "more_body": more}


RESPONSES = {
    "small": [_start(), _body(10)],
    "at the minimum": [_start(), _body(MINIMUM)],
    "large": [_start(), _body(5000)],
    "streamed": [_start(), _body(10, more=True), _body(10, more=True), _body(0)],
    "an event stream": [_start(b"text/event-stream"), _body(10, more=True), _body(0)],
    "already encoded": [_start(headers=[(b"content-encoding", b"br")]), _body(5000)],
    "partial": [_start(status=206), _body(5000)],
    "empty": [_start(), _body(0)],
}


@pytest.mark.parametrize("accept", [None, b"identity", b"br", b"gzip"])
@pytest.mark.parametrize("response", sorted(RESPONSES))
async def test_the_envelope_answers_as_starlettes_gzip_layer(
    response: str, accept: bytes | None
) -> None:
    headers = [] if accept is None else [(b"accept-encoding", accept)]
    app = _app(RESPONSES[response])
    envelope = RequestEnvelope(app, compression=Compression(min_bytes=MINIMUM, level=5))
    starlette = GZipMiddleware(app, minimum_size=MINIMUM, compresslevel=5)
    ours = await _sent(envelope, _scope([*headers, (b"x-request-id", b"r-1")]))
    theirs = await _sent(starlette, _scope(headers))
    for message in ours:
        if message["type"] == "http.response.start":
            assert message["headers"][-1] == (b"x-request-id", b"r-1")
            message["headers"] = message["headers"][:-1]
    if accept == b"gzip":  # gzip's bytes carry the time: compare all but the body
        for message in (*ours, *theirs):
            message.pop("body", None)
    assert ours == theirs


async def test_a_large_answer_to_a_client_without_gzip_varies_by_accept_encoding() -> None:
    envelope = RequestEnvelope(
        _app(RESPONSES["large"]), compression=Compression(min_bytes=MINIMUM, level=5)
    )
    start, body = await _sent(envelope, _scope([]))
    assert (b"vary", b"Accept-Encoding") in start["headers"]
    assert body["body"] == b"x" * 5000


async def test_a_request_id_is_the_first_one_sent_if_sane() -> None:
    envelope = RequestEnvelope(_app(RESPONSES["small"]))
    sent = await _sent(envelope, _scope([(b"x-request-id", b"mine"), (b"x-request-id", b"b")]))
    assert (b"x-request-id", b"mine") in sent[0]["headers"]
    fresh = await _sent(envelope, _scope([(b"x-request-id", b"has spaces")]))
    (rid,) = [value for name, value in fresh[0]["headers"] if name == b"x-request-id"]
    assert len(rid) == 32
    assert rid != b"has spaces"


async def test_a_content_length_of_other_digits_is_not_a_5xx() -> None:
    envelope = RequestEnvelope(_app(RESPONSES["small"]), max_body_bytes=100)
    sent = await _sent(envelope, _scope([(b"content-length", "²".encode("latin-1"))]))
    assert sent[0]["status"] == 200
    refused = await _sent(envelope, _scope([(b"content-length", b"101")]))
    assert refused[0]["status"] == 413


async def test_other_scopes_go_straight_to_the_app() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    envelope = RequestEnvelope(app, compression=Compression(min_bytes=MINIMUM, level=5))
    await envelope({"type": "lifespan"}, _never, _never)
    assert seen == ["lifespan"]


async def _never(*args: Any) -> Any:
    raise AssertionError("not called")
