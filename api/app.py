"""The FastAPI application factory: the one place the app is wired.

`create_app(settings, database_url=url)` is what `convo serve` runs: the app
opens a PostgreSQL storage (and an engine for API keys) when it starts and
closes them when it stops. Tests, or an embedding application, pass
`services=` instead — e.g. the in-memory storage with in-memory keys — and
the app uses them from the first request, needs no lifespan run, and never
closes them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.deps import Services
from api.errors import install_error_handlers
from api.routes import api_router
from store.api_keys import tenant_for_key
from store.bootstrap import open_storage
from store.commands import Limits
from store.db import make_async_engine
from store.settings import Settings

DESCRIPTION = """\
An event-sourced conversation store for LLM agents.

Every route but `/health` needs an API key (`convo keys create --tenant T
--name N`), sent as `Authorization: Bearer <key>` or `X-API-Key: <key>`.
A key acts for one tenant; another tenant's conversation is a 404.
Errors are `{"error": {"type": ..., "message": ...}}`.
"""

TAGS = [
    {"name": "conversations", "description": "Create, read, archive, delete."},
    {"name": "messages", "description": "Append (idempotent, optimistic concurrency), edit."},
    {"name": "agents", "description": "Agent profiles and context slots."},
    {"name": "batches", "description": "Visibility windows: start, truncate, filter, roll back."},
    {"name": "reads", "description": "Window, role look-ups, counts, tool blocks."},
    {"name": "assembly", "description": "Provider request payloads."},
    {"name": "health", "description": "Liveness (no key needed)."},
]


def create_app(
    settings: Settings, *, database_url: str | None = None, services: Services | None = None
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if services is not None:
            yield
            return
        assert database_url is not None, "create_app needs database_url or services"
        storage = await open_storage(database_url, settings)
        engine = make_async_engine(database_url, settings, pool_size=2, max_overflow=2)
        app.state.services = Services(
            storage=storage,
            tenant_for_key=lambda key: tenant_for_key(engine, key),
            limits=Limits(max_message_chars=settings.max_message_chars),
        )
        try:
            yield
        finally:
            await storage.close()
            await engine.dispose()

    app = FastAPI(
        title="convo-store",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
    )
    if services is not None:
        app.state.services = services
    install_error_handlers(app)
    app.include_router(api_router)

    @app.get("/health", tags=["health"], summary="Liveness")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
