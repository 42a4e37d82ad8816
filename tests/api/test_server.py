"""The app under a real uvicorn server (in a thread, on the in-memory
storage): a bug's 500 keeps the connection alive, requests in flight finish
when the server is stopped, and the logs carry request ids but no content.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from api.app import create_app
from api.deps import Services
from api.logging import JsonFormatter, RequestIdFilter
from api.server import Server
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.memory import MemoryStorage
from tests.api.conftest import BASE_URL, brief

SECRET = "the user's secret message"

# Set by `/slow` once its request is in the handler (the server runs in a
# thread of this process).
IN_FLIGHT = threading.Event()


def _app(settings: Settings) -> FastAPI:
    services = Services(
        storage=MemoryStorage(), tenant_for_key=MemoryKeys().tenant_for_key, limits=Limits()
    )
    app = create_app(settings, services=services)

    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError(SECRET)

    @app.get("/slow")
    async def slow() -> dict[str, str]:
        IN_FLIGHT.set()
        await asyncio.sleep(0.5)
        return {"status": "done"}

    return app


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """What the server's JSON handler writes, for the `convo` loggers."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("convo")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(previous)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.fixture
def server(settings: Settings) -> Iterator[tuple[Server, int]]:
    config = uvicorn.Config(
        _app(settings), host="127.0.0.1", port=0, log_config=None, lifespan="off"
    )
    server = Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port: int = server.servers[0].sockets[0].getsockname()[1]
    yield server, port
    server.should_exit = True
    thread.join(10)


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in header_lines)}
    length = int(headers["content-length"])
    while len(body) < length:
        body += sock.recv(65536)
    return int(status_line.split()[1]), headers, body


def test_a_500_is_json_and_keeps_the_connection_alive(
    server: tuple[Server, int], logs: io.StringIO
) -> None:
    _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /boom HTTP/1.1\r\nHost: test\r\n\r\n")
        status, headers, body = _read_response(sock)
        assert status == 500
        problem = json.loads(body)
        assert headers["content-type"] == "application/problem+json"
        assert (problem["type"], problem["status"], problem["detail"]) == (
            "InternalError",
            500,
            "the server failed to handle the request",
        )
        assert problem["instance"] == headers["x-request-id"]
        assert headers.get("connection") != "close"
        # The same connection serves the next request.
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n")
        status, _, body = _read_response(sock)
        assert status == 200
        assert json.loads(body) == {"status": "ok"}

    assert SECRET not in logs.getvalue()
    bug = next(line for line in _lines(logs) if line["logger"] == "convo.http")
    assert bug["level"] == "ERROR"
    assert bug["error_type"] == "RuntimeError"
    assert bug["request_id"] == headers["x-request-id"]
    assert any("in boom" in frame for frame in bug["error_frames"])  # type: ignore[attr-defined]


def test_a_request_in_flight_finishes_when_the_server_is_stopped(
    server: tuple[Server, int],
) -> None:
    instance, port = server
    answers: list[httpx.Response] = []
    request = threading.Thread(
        target=lambda: answers.append(httpx.get(f"http://127.0.0.1:{port}/slow", timeout=5))
    )
    IN_FLIGHT.clear()
    request.start()
    # In flight: in the handler (a fixed wait lost the race on a busy machine).
    assert IN_FLIGHT.wait(5)
    instance._stop(15, None)  # what SIGTERM does
    request.join(5)
    assert [a.status_code for a in answers] == [200]
    assert answers[0].json() == {"status": "done"}
    assert instance.stopped_by == "SIGTERM"
    deadline = time.monotonic() + 5
    while instance.started and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)


async def test_the_request_id_is_the_clients_or_a_new_one(settings: Settings) -> None:
    transport = httpx.ASGITransport(app=_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        given = await client.get("/health", headers={"X-Request-ID": "trace-42"})
        assert given.headers["X-Request-ID"] == "trace-42"
        made = await client.get("/health")
        assert len(made.headers["X-Request-ID"]) == 32
        unfit = await client.get("/health", headers={"X-Request-ID": "has spaces"})
        assert unfit.headers["X-Request-ID"] != "has spaces"
        errors = await client.get("/nowhere", headers={"X-Request-ID": "trace-43"})
        assert errors.status_code == 404
        assert errors.headers["X-Request-ID"] == "trace-43"


async def test_every_log_line_of_a_request_has_its_id(
    settings: Settings, logs: io.StringIO
) -> None:
    transport = httpx.ASGITransport(app=_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        await client.get("/boom", headers={"X-Request-ID": "trace-7"})
    lines = _lines(logs)
    assert {line["logger"] for line in lines} == {"convo.http", "convo.access"}
    assert {line["request_id"] for line in lines} == {"trace-7"}
    access = next(line for line in lines if line["logger"] == "convo.access")
    assert (access["method"], access["path"], access["status"]) == ("GET", "/boom", 500)
    assert SECRET not in logs.getvalue()


def test_the_json_formatter_never_prints_an_exceptions_message() -> None:
    try:
        try:
            raise KeyError(SECRET)
        except KeyError as inner:
            raise ValueError(f"bad value {SECRET}") from inner
    except ValueError as error:
        record = logging.LogRecord(
            "uvicorn.error",
            logging.ERROR,
            __file__,
            1,
            "Exception in ASGI application",
            None,
            (type(error), error, error.__traceback__),
        )
    line = JsonFormatter().format(record)
    assert SECRET not in line
    entry = json.loads(line)
    assert entry["error_type"] == "ValueError"
    assert entry["error_chain"] == ["KeyError"]
    assert "\n" not in line


async def test_a_body_over_the_limit_is_a_413_before_it_is_read(settings: Settings) -> None:
    small = settings.model_copy(update={"max_body_bytes": 1000})
    transport = httpx.ASGITransport(app=_app(small))
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        declared = await client.post("/conversations", content=b"x" * 1001)
        assert declared.status_code == 413
        assert brief(declared) == {
            "type": "PayloadTooLarge",
            "detail": "body: the request body is over the limit of 1000 bytes",
        }

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(20):
                yield b"x" * 100

        streamed = await client.post(
            "/conversations", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert "content-length" not in streamed.request.headers
        assert streamed.status_code == 413
        assert streamed.json()["type"] == "PayloadTooLarge"
