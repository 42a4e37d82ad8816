"""The FastAPI application factory.

`create_app(database_url, settings)` is what `convo serve` runs: the app owns
an engine, made when it starts and disposed when it stops. Tests (or an
embedding application) pass `engine=` instead; the app then uses it as it is
from the first request, needs no lifespan run, and never disposes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from api.errors import install_error_handlers
from api.routes import api_router
from store import commands
from store.db import make_async_engine
from store.log import EventLog
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


def _use_engine(app: FastAPI, engine: AsyncEngine) -> None:
    app.state.engine = engine
    app.state.event_log = EventLog(engine)


def create_app(
    database_url: str, settings: Settings, *, engine: AsyncEngine | None = None
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if engine is not None:
            yield
            return
        owned = make_async_engine(database_url, settings)
        _use_engine(app, owned)
        try:
            yield
        finally:
            await owned.dispose()

    app = FastAPI(
        title="convo-store",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
    )
    app.state.limits = commands.Limits.from_settings(settings)
    if engine is not None:
        _use_engine(app, engine)
    install_error_handlers(app)
    app.include_router(api_router)

    @app.get("/health", tags=["health"], summary="Liveness")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
