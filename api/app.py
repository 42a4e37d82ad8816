"""The FastAPI application factory: the one place the app is wired.

`create_app(settings, database_url=url)` is what `convo serve` runs: the app
opens a PostgreSQL storage (and a look-up of API keys) when it starts and
closes them when it stops. Tests, or an embedding application, pass
`services=` instead — e.g. the in-memory storage with in-memory keys — and
the app uses them from the first request, needs no lifespan run, and never
closes them.

Every request goes through one envelope, `api.middleware.RequestEnvelope`,
which does, from the outside in: the request id, access line and metrics,
CORS when `CONVO_CORS_ORIGINS` is set, gzip for a response of at least
`CONVO_GZIP_MIN_BYTES` when the client accepts it (never an event stream,
which must not be held back), the catch-all for a bug's 500, the body and
URL limits, and the `Convo-Consistency` token. `/health` is liveness: the
process answers, nothing else is asked. `/ready` is readiness: the storage
answers a query (503 with the error body while the database is down,
decided within a second: `api.readiness`), so a load balancer stops
sending traffic to a replica that cannot serve it. `/metrics` is Prometheus'
(`api.metrics`). `/docs` and `/redoc` are served with their scripts from
an installed package (`api.docs`), so they work offline; `/ui/` is the
analysts' console (`api.console`), its files shipped in the package and
served with a strict Content-Security-Policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.telemetry import TelemetryConfig

from api.consistency import CONSISTENCY_HEADER
from api.console import install_console
from api.deps import Services, ServicesDep
from api.docs import install_docs
from api.errors import CONVERSATION_ERRORS, install_error_handlers
from api.metrics import CONTENT_TYPE, Metrics, process_ended
from api.middleware import REQUEST_ID_HEADER, Compression, Cors, RequestEnvelope
from api.openapi import install_openapi, operation_id_of
from api.quota import QuotaExceeded, TenantQuotas
from api.ratelimit import KeyRateLimits, RateLimited
from api.readiness import Readiness
from api.routes import install_routes
from hosting.bootstrap import open_keys, open_storage
from hosting.settings import Settings, limits_from_settings
from store.domain.errors import StorageFailure

_log = logging.getLogger("convo.storage")

DESCRIPTION = """\
An event-sourced conversation store for LLM agents.

Every route but `/health`, `/ready` and `/metrics` needs an API key (`convo keys create --tenant T
--name N`), sent as `Authorization: Bearer <key>` or `X-API-Key: <key>`.
A key acts for one tenant; another tenant's conversation is a 404.
Errors are RFC 9457 problem details (`application/problem+json`): `type`
(a stable slug per error class), `title`, `status`, `detail`, `instance`
(the request's id), and for a validation error `errors`, one
`{pointer, detail}` per field.
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
    {"name": "keys", "description": "What the request's API key allows."},
    {"name": "health", "description": "Liveness, readiness and metrics (no key needed)."},
]


TELEMETRY_OFF: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}

# gzip level: close to the default's ratio on JSON, at a fraction of level 9's time.
GZIP_LEVEL = 5
CORS_HEADERS = [
    "Authorization",
    "X-API-Key",
    "Content-Type",
    "Idempotency-Key",
    REQUEST_ID_HEADER,
    CONSISTENCY_HEADER,
]


def create_app(
    settings: Settings, *, database_url: str | None = None, services: Services | None = None
) -> FastAPI:
    metrics = Metrics()
    readiness = Readiness()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if services is not None:
            yield
            return
        assert database_url is not None, "create_app needs database_url or services"
        storage = await open_storage(
            database_url,
            settings,
            on_replica_skip=metrics.replica_skipped,
            on_read_routed=metrics.read_routed,
        )
        for warning in await storage.server_warnings():
            _log.warning(warning)
        try:
            keys = await open_keys(database_url, settings)
        except BaseException:
            await storage.close()
            raise
        app.state.services = Services(
            storage=storage,
            tenant_for_key=keys.tenant_for_key,
            grant_for_key=keys.grant_for_key,
            limits=limits_from_settings(settings),
        )
        sampling = asyncio.get_running_loop().create_task(metrics.sample_pool(storage))
        try:
            yield
        finally:
            sampling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampling
            process_ended()
            await storage.close()
            await keys.close()

    app = FastAPI(
        title="convo-store",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        generate_unique_id_function=operation_id_of,
        docs_url=None,
        redoc_url=None,
        # FastAPI's OpenTelemetry hooks, off: the service's metrics are its
        # own (`/metrics`), and asking the providers whether they are set up
        # cost every request a share of its CPU (docs/http-api.md, "Speed").
        telemetry=TELEMETRY_OFF,
    )
    if services is not None:
        app.state.services = services
    app.state.metrics = metrics
    rate_limits = KeyRateLimits(
        requests_per_s=settings.rate_limit_per_s,
        request_burst=settings.rate_limit_burst,
        bytes_per_s=settings.rate_limit_bytes_per_s,
        bytes_burst=settings.rate_limit_bytes_burst,
    )
    app.state.rate_limits = rate_limits if rate_limits.enabled else None
    quotas = TenantQuotas(
        max_conversations=settings.tenant_max_conversations,
        max_stored_bytes=settings.tenant_max_stored_bytes,
    )
    app.state.quotas = quotas if quotas.enabled else None
    install_error_handlers(app)
    app.add_exception_handler(RateLimited, _refused)
    app.add_exception_handler(QuotaExceeded, _refused)
    cors = None
    if settings.cors_origins:
        cors = Cors(
            allow_origins=list(settings.cors_origins),
            allow_methods=["*"],
            allow_headers=CORS_HEADERS,
            expose_headers=[REQUEST_ID_HEADER, "Retry-After", CONSISTENCY_HEADER],
        )
    app.add_middleware(
        RequestEnvelope,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        compression=Compression(min_bytes=settings.gzip_min_bytes, level=GZIP_LEVEL),
        cors=cors,
    )
    install_routes(app)
    install_openapi(app)
    install_docs(app)
    install_console(app)

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
        """The storage answers a query; 503 with Retry-After while it cannot
        (answered within a second whatever the database does)."""
        await readiness.check(services.storage)
        return {"status": "ready"}

    @app.get(
        "/metrics",
        tags=["health"],
        summary="Prometheus metrics",
        operation_id="metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Text format 0.0.4"}},
    )
    async def metrics_text() -> Response:
        """Request counts and latencies by route and status, storage errors,
        appends, compactions, the connection pool and the feed's lag, in
        Prometheus' text format: every worker's, whichever answers."""
        current: Services | None = getattr(app.state, "services", None)
        if current is not None:
            metrics.observe_pool(current.storage)
            metrics.observe_replicas(current.storage)
            # A scrape while the database is down still answers, without it.
            with contextlib.suppress(StorageFailure):
                metrics.observe_feed_lag(await current.storage.feed_lag())
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return app


async def _refused(request: Request, error: Exception) -> Response:
    assert isinstance(error, RateLimited | QuotaExceeded)
    return error.response()


def app_from_environment() -> FastAPI:
    """The app a worker process of `convo serve --workers N` builds: settings
    from the environment, the database the parent opened and migrated."""
    import os

    from api.server import WORKER_DATABASE_URL

    return create_app(Settings.from_env(), database_url=os.environ[WORKER_DATABASE_URL])
