"""The app in process for a client: the API over a given storage, with a key
of the default tenant, so a local `Repository` over the same storage sees
what the client wrote (tests/client, and tests/adapters over HTTP)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from api.app import create_app
from api.deps import Services
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
