"""bench.http_client, the load generator's lean HTTP/1.1 client, against a
loopback server that answers with canned bytes: lengths, chunks, a closed
connection, and what is not HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from bench.http_client import Connection, Pool, ResponseError

Answer = Callable[[bytes], bytes]  # the request's bytes -> the response's


class Canned:
    """A server that reads each request (head and Content-Length body) and
    writes `answer(request)`; it counts connections and requests."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                response = self.answer(request)
                writer.write(response)
                await writer.drain()
                if b"Connection: close" in response:
                    break
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()


Serve = Callable[[Answer], Awaitable[Canned]]


@pytest_asyncio.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def started(answer: Answer) -> Canned:
        canned = Canned(answer)
        server = await asyncio.start_server(canned.handle, "127.0.0.1", 0)
        servers.append(server)
        canned.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return canned

    yield started
    for server in servers:
        server.close()
        await server.wait_closed()


def _length(body: bytes, *, status: bytes = b"201 Created", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n%s" % (status, len(body), extra, body)


async def test_a_request_carries_its_headers_and_body_and_reads_the_answer(serve: Serve) -> None:
    canned = await serve(lambda request: _length(b'{"id":"c1"}'))
    connection = Connection(canned.url, {"Authorization": "Bearer k"})
    response = await connection.post("/conversations/c1/messages", b'{"a":1}')
    await connection.close()
    assert (response.status, response.body) == (201, b'{"id":"c1"}')
    request = canned.requests[0]
    assert request.startswith(b"POST /conversations/c1/messages HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Bearer k\r\n" in request
    assert b"\r\nContent-Length: 7\r\n" in request
    assert request.endswith(b'\r\n\r\n{"a":1}')


async def test_requests_share_one_keep_alive_connection(serve: Serve) -> None:
    canned = await serve(lambda request: _length(b"ok", status=b"200 OK"))
    connection = Connection(canned.url, {})
    statuses = [(await connection.post("/x", b"%d" % i)).status for i in range(5)]
    await connection.close()
    assert statuses == [200] * 5
    assert canned.connections == 1


async def test_a_chunked_answer_is_joined(serve: Serve) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    )
    canned = await serve(lambda request: chunked)
    connection = Connection(canned.url, {})
    first = await connection.post("/x", b"")
    second = await connection.post("/x", b"")
    await connection.close()
    assert first.body == second.body == b"abcde"
    assert canned.connections == 1


async def test_a_connection_the_server_closes_is_opened_again(serve: Serve) -> None:
    closing = _length(b"bye", status=b"409 Conflict", extra=b"Connection: close\r\n")
    canned = await serve(lambda request: closing)
    connection = Connection(canned.url, {})
    statuses = [(await connection.post("/x", b"")).status for _ in range(3)]
    await connection.close()
    assert statuses == [409] * 3
    assert canned.connections == 3


async def test_an_answer_that_is_not_http_is_an_error(serve: Serve) -> None:
    canned = await serve(lambda request: b"SSH-2.0-OpenSSH\r\n\r\n")
    connection = Connection(canned.url, {})
    with pytest.raises(ResponseError, match="not an HTTP/1 status line"):
        await connection.post("/x", b"")


async def test_a_pool_opens_a_connection_per_request_in_flight_and_reuses_them(
    serve: Serve,
) -> None:
    canned = await serve(lambda request: _length(b"ok", status=b"200 OK"))
    pool = Pool(canned.url, {})
    first = await asyncio.gather(*(pool.post("/x", b"") for _ in range(4)))
    again = await asyncio.gather(*(pool.post("/x", b"") for _ in range(4)))
    await pool.close()
    assert [r.status for r in first + again] == [200] * 8
    assert canned.connections == 4


def test_only_plain_http_urls_are_taken() -> None:
    with pytest.raises(ValueError, match="http://host:port"):
        Connection("https://example.test:443", {})
