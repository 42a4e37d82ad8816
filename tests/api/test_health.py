"""/health is liveness (no database), /ready is readiness (the storage answers)."""

from __future__ import annotations

import httpx
import psycopg
from sqlalchemy import make_url

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings, libpq_url
from store.domain.commands import Limits
from store.postgres import PostgresStorage
from tests.api.conftest import BASE_URL


async def test_ready_when_the_storage_answers(client: httpx.AsyncClient) -> None:
    response = await client.get("/ready")
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}


async def test_ready_is_a_503_while_the_database_is_down_and_health_stays_200(
    empty_database_url: str, settings: Settings
) -> None:
    # Only pinged: no schema needed.
    storage = await PostgresStorage.connect(
        empty_database_url, options=settings.connection_options(), timeout=1.0, check_schema=False
    )
    services = Services(
        storage=storage, tenant_for_key=MemoryKeys().tenant_for_key, limits=Limits()
    )
    transport = httpx.ASGITransport(app=create_app(settings, services=services))
    try:
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            assert (await client.get("/ready")).status_code == 200
            # The database goes away (its connections are cut, it cannot be reached).
            name = make_url(empty_database_url).database
            server = make_url(empty_database_url).set(database="postgres")
            with psycopg.connect(libpq_url(server.render_as_string(False)), autocommit=True) as c:
                c.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

            down = await client.get("/ready")
            assert down.status_code == 503
            assert down.headers["Retry-After"] == "1"
            assert down.json()["type"] == "StorageUnavailable"
            assert (await client.get("/health")).status_code == 200
    finally:
        await storage.close()
