"""The FastAPI application factory: the one place the app is wired.

`create_app(settings, database_url=url)` is what `convo serve` runs: the app
opens a PostgreSQL storage (and an engine for API keys) when it starts and
closes them when it stops. Tests, or an embedding application, pass
`services=` instead — e.g. the in-memory storage with in-memory keys — and
the app uses them from the first request, needs no lifespan run, and never
closes them.

Every request goes through `api.middleware` (request id, body and URL
limits, request metrics) and `api.errors.CatchAll`. `/health` is liveness: the process
answers, nothing else is asked. `/ready` is readiness: the storage answers
a query (503 with the error body while the database is down), so a load
balancer stops sending traffic to a replica that cannot serve it.
`/metrics` is the app's counters in Prometheus' text format (`api.metrics`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from api.deps import Services, ServicesDep
from api.errors import CONVERSATION_ERRORS, install_error_handlers
from api.metrics import CONTENT_TYPE, Metrics, pool_stats
from api.middleware import RequestContext, RequestLimits
from api.openapi import install_openapi, operation_id_of
from api.routes import api_router
from hosting.bootstrap import open_storage
from hosting.keys import KeyLookup
from hosting.settings import Settings, limits_from_settings
from store.domain.errors import StorageFailure

_log = logging.getLogger("convo.storage")

DESCRIPTION = """\
An event-sourced conversation store for LLM agents.

Every route but `/health`, `/ready` and `/metrics` needs an API key (`convo keys create --tenant T
--name N`), sent as `Authorization: Bearer <key>` or `X-API-Key: <key>`.
A key acts for one tenant; another tenant's conversation is a 404.
Errors are `{"error": {"type": ..., "message": ...}}`.
"""

TAGS = [
    {
        "name": "conversations",
        "description": "Create, list, read, update metadata, archive, unarchive, delete.",
    },
    {"name": "messages", "description": "Append (idempotent, optimistic concurrency), edit."},
    {"name": "agents", "description": "Agent profiles and context slots."},
    {"name": "batches", "description": "Visibility windows: start, truncate, filter, roll back."},
    {"name": "reads", "description": "Window, role look-ups, counts, tool blocks."},
    {"name": "assembly", "description": "Provider request payloads."},
    {"name": "health", "description": "Liveness, readiness and metrics (no key needed)."},
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
        for warning in await storage.server_warnings():
            _log.warning(warning)
        try:
            keys = await KeyLookup.connect(database_url, options=settings.connection_options())
        except BaseException:
            await storage.close()
            raise
        app.state.services = Services(
            storage=storage,
            tenant_for_key=keys.tenant_for_key,
            limits=limits_from_settings(settings),
        )
        try:
            yield
        finally:
            await storage.close()
            await keys.close()

    app = FastAPI(
        title="convo-store",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        generate_unique_id_function=operation_id_of,
    )
    if services is not None:
        app.state.services = services
    metrics = app.state.metrics = Metrics()
    # Added innermost first: RequestContext ends up outermost.
    app.add_middleware(RequestLimits, max_body_bytes=settings.max_body_bytes)
    install_error_handlers(app)  # and CatchAll, around RequestLimits
    app.add_middleware(RequestContext, metrics=metrics)
    app.include_router(api_router)
    install_openapi(app)

    @app.get("/health", tags=["health"], summary="Liveness", operation_id="health")
    async def health() -> dict[str, str]:
        """The process answers; the database is not asked (see `/ready`)."""
        return {"status": "ok"}

    @app.get(
        "/ready",
        tags=["health"],
        summary="Readiness",
        operation_id="ready",
        responses={503: CONVERSATION_ERRORS[503]},
    )
    async def ready(services: ServicesDep) -> dict[str, str]:
        """The storage answers a query; 503 with Retry-After while it cannot."""
        await services.storage.ping()
        return {"status": "ready"}

    @app.get(
        "/metrics",
        tags=["health"],
        summary="Prometheus metrics",
        operation_id="metrics",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {}}, "description": "Text format 0.0.4"}},
    )
    async def metrics_text() -> PlainTextResponse:
        """Request counts and latencies by route, storage errors, appends, and the
        connection pool, in Prometheus' text format."""
        current: Services | None = getattr(app.state, "services", None)
        stats = pool_stats(current.storage) if current is not None else None
        lag = None
        if current is not None:
            # A scrape while the database is down still answers, without it.
            with contextlib.suppress(StorageFailure):
                lag = await current.storage.feed_lag()
        return PlainTextResponse(metrics.render(stats, lag), media_type=CONTENT_TYPE)

    return app


def app_from_environment() -> FastAPI:
    """The app a worker process of `convo serve --workers N` builds: settings
    from the environment, the database the parent opened and migrated."""
    import os

    from api.server import WORKER_DATABASE_URL

    return create_app(Settings.from_env(), database_url=os.environ[WORKER_DATABASE_URL])
