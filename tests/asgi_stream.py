"""A GET of a streamed response (the SSE feed, an export) on an ASGI app,
read as it is sent, in process: httpx's in-process transport waits for a
response's end, and a stream may never end. Leaving it sends
`http.disconnect`, as a browser closing the page would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Self

from starlette.types import ASGIApp

PATIENCE = 30.0  # seconds to wait for what must come, on a loaded machine


class AsgiStream:
    """`GET path?query` with `key` (and any other headers) on `app`.

    `body` grows as the app sends; `status` is the response's. Clearing
    `reading` makes a client that reads slowly: the app's sends wait."""

    def __init__(self, app: ASGIApp, path: str, key: str, query: str = "", **headers: str) -> None:
        self.app = app
        self.body = b""
        self.status: int | None = None
        self.ended_at = 0.0  # perf_counter when the last chunk came
        self.grew, self.disconnect, self.reading = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.reading.set()
        sent = [("authorization", f"Bearer {key}")] + [
            (name.replace("_", "-").lower(), value) for name, value in headers.items()
        ]
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": query.encode(),
            "headers": [(n.encode(), v.encode()) for n, v in sent],
            "client": ("127.0.0.1", 5000),
            "server": ("convo.test", 80),
        }
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        requested = False

        async def receive() -> dict[str, Any]:
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await self.disconnect.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            await self.reading.wait()
            if message["type"] == "http.response.start":
                self.status = message["status"]
            elif message["type"] == "http.response.body":
                self.body += message.get("body", b"")
                if not message.get("more_body", False):
                    self.ended_at = time.perf_counter()
                self.grew.set()

        self.task = asyncio.create_task(self.app(self.scope, receive, send))  # type: ignore[arg-type]
        return self

    async def __aexit__(self, *_: object) -> None:
        self.disconnect.set()
        self.reading.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, timeout=PATIENCE)

    async def until(self, done: Callable[[bytes], bool], *, or_end: bool = False) -> bytes:
        """The body once `done(body)` holds (or, `or_end`, the response has
        ended); fails after `PATIENCE` seconds."""

        async def wait() -> bytes:
            while not done(self.body):
                if or_end and self.task is not None and self.task.done():
                    break
                self.grew.clear()
                await self.grew.wait()
            return self.body

        return await asyncio.wait_for(wait(), timeout=PATIENCE)

    async def ended(self, timeout: float) -> None:  # noqa: ASYNC109 - the promise's bound
        assert self.task is not None
        await asyncio.wait_for(asyncio.shield(self.task), timeout=timeout)
