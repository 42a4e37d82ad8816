"""The floor of an HTTP append on these cores: the least a server can do
around `Repository.append_messages` (a side of `bench.http_load`, for
information).

A bare ASGI app served by the same uvicorn as `convo serve` (httptools,
uvloop, no access log of uvicorn's, no `Server` header), one worker, over
the same repository the benchmarks construct (`bench.harness`): it reads
the body, parses it with orjson, validates the messages with the store's
`Message` model (as the route's body model does), appends them, and answers
the `Appended` as JSON. It has none of the service: no key check, no
request id, no access line, no metrics, no problem details, no limits, no
routing beyond the three paths it knows, and any failure is a bare 500.

What the service's figures are measured against stays the in-process
repository; this side says how much of the distance is the HTTP server and
the store running in a server process (fewer appends gathered per
statement than 32 coroutines of one process gather), and how much the
service's own layers.

    DATABASE_URL=… python -m uvicorn --factory bench.http_floor:app --port 8001
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import unquote

import orjson
from pydantic import TypeAdapter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bench.harness import open_repository
from hosting.settings import Settings
from store.domain.messages import Message as StoreMessage
from store.repository import Repository

__all__ = ["app"]

_MESSAGES = TypeAdapter(list[StoreMessage])
_JSON = [(b"content-type", b"application/json")]


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send, state: dict[str, Any]) -> None:
    stack = AsyncExitStack()
    while True:
        message: Message = await receive()
        if message["type"] == "lifespan.startup":
            state["repository"] = await stack.enter_async_context(
                open_repository(
                    os.environ["DATABASE_URL"], Settings.from_env(), pool_size=10, min_size=1
                )
            )
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await stack.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return


def app() -> ASGIApp:
    """The floor app (a factory: uvicorn's `--factory`)."""
    state: dict[str, Any] = {}

    async def floor(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, state)
            return
        body = await _body(receive)
        repository: Repository = state["repository"]
        path: str = scope["path"]
        if path == "/ready":
            await _answer(send, 200, b'{"status":"ready"}')
        elif path == "/conversations":
            created = await repository.create_conversation(metadata=orjson.loads(body)["metadata"])
            await _answer(send, 201, orjson.dumps({"id": created.id, "version": created.version}))
        elif path.startswith("/conversations/") and path.endswith("/messages"):
            request = orjson.loads(body)
            appended = await repository.append_messages(
                unquote(path.split("/")[2]),
                _MESSAGES.validate_python(request["messages"]),
                expected_version=request.get("expected_version"),
            )
            await _answer(send, 201, appended.model_dump_json().encode())
        else:
            await _answer(send, 404, b"{}")

    return floor
