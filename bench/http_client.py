"""A lean HTTP/1.1 client for the load generator (bench.http_load).

The generator shares the machine's 2 cores with the server and PostgreSQL,
so every millisecond of its own CPU is one the server does not get. httpx
took most of a core at the rates measured, and the HTTP figures measured
the generator as much as the server (docs/bench-methods.md). This client
sends bodies serialized before the clock over keep-alive connections with
asyncio streams and reads the answer's status and body, nothing more: what
any HTTP client must do, at a fraction of httpx's cost a request.

It speaks only what `convo serve` answers a POST with: a status line,
headers, and a body of `Content-Length` bytes, or chunked. A connection the
server closes (`Connection: close`) is opened again for the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from urllib.parse import urlsplit

_MAX_HEAD = 64 * 1024  # a response's status line and headers


class ResponseError(Exception):
    """The server's answer was not HTTP/1.1 as this client reads it."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes


class Connection:
    """One keep-alive connection to `base_url`, one request at a time, each
    sent with the same `headers` (and its own Content-Length)."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"an http://host:port URL, not {base_url!r}")
        self._host, self._port = parts.hostname, parts.port
        fixed = {"Host": f"{self._host}:{self._port}", **headers}
        self._head = "".join(f"{name}: {value}\r\n" for name, value in fixed.items()).encode()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, target: str, body: bytes) -> Response:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        self._writer.write(
            b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s"
            % (target.encode(), self._head, len(body), body)
        )
        try:
            response, keep = await _read_response(self._reader)
        except BaseException:
            await self.close()
            raise
        if not keep:
            await self.close()
        return response

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _read_response(reader: asyncio.StreamReader) -> tuple[Response, bool]:
    """The next response on `reader`, and whether the connection stays open."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise ResponseError("response headers over the reader's limit") from None
    except asyncio.IncompleteReadError:
        raise ResponseError("the server closed the connection") from None
    if len(head) > _MAX_HEAD:
        raise ResponseError("response headers too long")
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ResponseError(f"not an HTTP/1 status line: {lines[0]!r}")
    status = int(rest[:3])
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
    if fields.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(fields.get("content-length", "0")))
    keep = fields.get("connection", "").lower() != "close" and version == "HTTP/1.1"
    return Response(status, body), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers: the last CRLF
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


class Pool:
    """Keep-alive connections shared by concurrent requests: an idle one if
    there is one, else a new one; at most as many as requests in flight."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self._base_url, self._headers = base_url, headers
        self._idle: list[Connection] = []
        self._all: list[Connection] = []

    async def post(self, target: str, body: bytes) -> Response:
        if self._idle:
            connection = self._idle.pop()
        else:
            connection = Connection(self._base_url, self._headers)
            self._all.append(connection)
        try:
            response = await connection.post(target, body)
        except BaseException:
            self._all.remove(connection)
            raise
        self._idle.append(connection)
        return response

    async def close(self) -> None:
        for connection in self._all:
            await connection.close()
        self._idle.clear()
        self._all.clear()
