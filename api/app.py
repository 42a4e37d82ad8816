"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from store.db import make_async_engine
from store.log import EventLog
from store.settings import Settings


def create_app(database_url: str, settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_async_engine(database_url, settings)
        app.state.engine = engine
        app.state.event_log = EventLog(engine)
        try:
            yield
        finally:
            await engine.dispose()

    app = FastAPI(title="convo-store", version="0.1.0", lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
