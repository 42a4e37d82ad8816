"""The app in process for a client: the API over a given storage, with a key
of the default tenant, so a local `Repository` over the same storage sees
what the client wrote (tests/client, and tests/adapters over HTTP)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from api.app import create_app
from api.deps import Services
from api.server import Server
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.client import AsyncConvoClient, RetryPolicy
from store.domain.commands import Limits
from store.repository import DEFAULT_TENANT
from store.repository.port import Storage

BASE_URL = "http://convo.test"


def serving(storage: Storage, settings: Settings) -> tuple[FastAPI, str]:
    """The app serving `storage`, and a key of its default tenant."""
    keys = MemoryKeys()
    key = keys.create(DEFAULT_TENANT, "tests")
    app = create_app(
        settings,
        services=Services(storage=storage, tenant_for_key=keys.tenant_for_key, limits=Limits()),
    )
    return app, key


def asgi_client(
    storage: Storage, settings: Settings, *, retry: RetryPolicy | None = None
) -> AsyncConvoClient:
    """A client of the app serving `storage`, in process, as the default tenant."""
    app, key = serving(storage, settings)
    return AsyncConvoClient(
        BASE_URL,
        api_key=key,
        transport=httpx.ASGITransport(app=app),
        retry=retry,
    )


@contextmanager
def on_uvicorn(app: ASGIApp, *, start_timeout: float = 30) -> Iterator[str]:
    """`app` served by uvicorn on a free port of 127.0.0.1, in a thread of
    this process, as `convo serve` runs it (a server that streams, which
    httpx's in-process transport does not); its base URL, until the end."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on")
    server = Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        assert thread.is_alive(), "the server failed to start"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port: int = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
