"""store.postgres.driver_errors.translate on errors a real server raises:
constraint violations by name, a lock wait past lock_timeout, a statement
past statement_timeout, a closed port, a full pool, a terminated backend.
And what never leaves the boundary: parameters and stored values."""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import psycopg
import psycopg_pool
import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from hosting.engines import make_async_engine
from hosting.settings import Settings, libpq_url
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationBusy,
    ConvoStoreError,
    IdempotencyConflict,
    StorageError,
    StorageUnavailable,
)
from store.domain.messages import Message
from store.postgres import PostgresStorage
from store.postgres.driver_errors import translate
from store.repository import Repository

SECRET = "the user's secret message"

Statement = tuple[str, dict[str, Any]]


def _conversation(cid: uuid.UUID) -> Statement:
    return "INSERT INTO conversations (id, key) VALUES (:id, :id)", {"id": cid}


def _event(cid: uuid.UUID, version: int) -> Statement:
    return (
        "INSERT INTO events (conversation_id, version, type, data)"
        " VALUES (:cid, :version, 'message_appended', CAST(:data AS json))",
        {"cid": cid, "version": version, "data": f'{{"text": "{SECRET}"}}'},
    )


def _append_request(cid: uuid.UUID, key: str) -> Statement:
    return (
        "INSERT INTO append_requests"
        " (conversation_id, idempotency_key, request_hash, first_version, last_version)"
        " VALUES (:cid, :key, 'hash', 1, 1)",
        {"cid": cid, "key": key},
    )


def _message(cid: uuid.UUID, seq: int, client_message_id: str) -> Statement:
    return (
        "INSERT INTO messages (conversation_id, seq, event_version, role_ordinal, batch,"
        " token_estimate, sort_key, role, agent_id, kind, client_message_id)"
        " VALUES (:cid, :seq, :seq, :seq, 1, 1, :seq, 'user', 'main', 'message',"
        " :client_message_id)",
        {"cid": cid, "seq": seq, "client_message_id": client_message_id},
    )


async def _fails(
    engine: AsyncEngine, statements: Sequence[Statement], cid: uuid.UUID
) -> tuple[Exception, ConvoStoreError | None]:
    """Run the statements in one transaction, as the storage does, and
    translate what escapes it."""
    try:
        async with engine.begin() as conn:
            for sql, params in statements:
                await conn.execute(text(sql), params)
    except Exception as error:
        return error, translate(error, conversation_id=cid)
    raise AssertionError("the statements did not fail")


@pytest.fixture
def cid() -> uuid.UUID:
    return uuid.uuid4()


@pytest.fixture
def log_records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="convo.storage")
    return caplog


# Constraint violations, by the names the schema chose.


async def test_a_duplicate_stream_version_is_a_concurrency_conflict(
    engine: AsyncEngine, cid: uuid.UUID
) -> None:
    _, ours = await _fails(engine, [_conversation(cid), _event(cid, 1), _event(cid, 1)], cid)
    assert isinstance(ours, ConcurrencyConflict)
    assert ours.conversation_id == cid


async def test_a_raced_idempotency_key_is_an_idempotency_conflict(
    engine: AsyncEngine, cid: uuid.UUID
) -> None:
    statements = [_conversation(cid), _append_request(cid, "k"), _append_request(cid, "k")]
    _, ours = await _fails(engine, statements, cid)
    assert isinstance(ours, IdempotencyConflict)


async def test_a_reused_client_message_id_is_an_idempotency_conflict(
    engine: AsyncEngine, cid: uuid.UUID
) -> None:
    _, ours = await _fails(engine, [_message(cid, 1, "m1"), _message(cid, 2, "m1")], cid)
    assert isinstance(ours, IdempotencyConflict)


async def test_a_check_violation_is_a_storage_error_that_quotes_nothing(
    engine: AsyncEngine, cid: uuid.UUID, log_records: pytest.LogCaptureFixture
) -> None:
    error, ours = await _fails(engine, [_conversation(cid), _event(cid, 0)], cid)
    # The server's message quotes the failing row (our secret); the engine
    # hides the parameters, but only we keep the row out.
    assert "SQL parameters hidden" in str(error)
    assert isinstance(ours, StorageError)
    assert (ours.sqlstate, ours.error_class) == ("23514", "CheckViolation")
    assert SECRET not in str(ours)
    [record] = log_records.records
    assert "ck_events_version_positive" in record.getMessage()
    assert str(cid) in record.getMessage()
    assert SECRET not in log_records.text


async def test_a_foreign_key_violation_is_a_storage_error(
    engine: AsyncEngine, cid: uuid.UUID
) -> None:
    # No table of ours has a foreign key any more (events are written under
    # the stream lock); a violation of one, e.g. an operator's, is a bug.
    statements: list[Statement] = [
        ("CREATE TEMP TABLE parent (id int PRIMARY KEY)", {}),
        ("CREATE TEMP TABLE child (id int REFERENCES parent (id))", {}),
        ("INSERT INTO child VALUES (1)", {}),
    ]
    _, ours = await _fails(engine, statements, cid)
    assert isinstance(ours, StorageError)
    assert ours.sqlstate == "23503"


async def test_a_failed_statement_shows_no_parameters(
    engine: AsyncEngine, cid: uuid.UUID, log_records: pytest.LogCaptureFixture
) -> None:
    error, ours = await _fails(engine, [("SELECT CAST(:v AS integer)", {"v": "not a number"})], cid)
    assert "not a number" not in str(error).split("[SQL:")[1]
    assert isinstance(ours, StorageError)
    assert ours.error_class == "InvalidTextRepresentation"
    assert "not a number" not in log_records.text


async def test_raw_psycopg_errors_in_a_pipeline_translate_the_same(
    engine: AsyncEngine, database_url: str, cid: uuid.UUID
) -> None:
    """The PostgreSQL storage talks psycopg directly, pipelined: no SQLAlchemy."""
    sql, params = _conversation(cid)
    async with engine.begin() as conn:
        await conn.execute(text(sql), params)
    insert = (
        "INSERT INTO events (conversation_id, version, type, data)"
        " VALUES (%(cid)s, 1, 'message_appended', '{}'::json)"
    )

    async def insert_twice(raw: psycopg.AsyncConnection[Any]) -> None:
        async with raw.transaction(), raw.pipeline():
            await raw.execute(insert, {"cid": cid})
            await raw.execute(insert, {"cid": cid})

    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as raw:
        with pytest.raises(psycopg.Error) as caught:
            await insert_twice(raw)
    ours = translate(caught.value, conversation_id=cid)
    assert isinstance(ours, ConcurrencyConflict), caught.value
    assert ours.conversation_id == cid


# Lock and statement timeouts.


async def test_a_lock_held_past_lock_timeout_is_a_busy_conversation(
    engine: AsyncEngine, cid: uuid.UUID
) -> None:
    sql, params = _conversation(cid)
    async with engine.begin() as conn:
        await conn.execute(text(sql), params)
    lock = text("SELECT version FROM conversations WHERE id = :id FOR UPDATE")
    async with engine.begin() as holder:
        await holder.execute(lock, {"id": cid})
        _, ours = await _fails(
            engine, [("SET LOCAL lock_timeout = '50ms'", {}), (str(lock), {"id": cid})], cid
        )
    assert isinstance(ours, ConversationBusy)
    assert ours.conversation_id == cid
    assert ours.sqlstate == "55P03"
    assert ours.retry_after == 1.0


async def test_a_statement_past_statement_timeout_is_unavailable(
    engine: AsyncEngine, cid: uuid.UUID, log_records: pytest.LogCaptureFixture
) -> None:
    statements: list[Statement] = [
        ("SET LOCAL statement_timeout = '50ms'", {}),
        ("SELECT pg_sleep(5)", {}),
    ]
    _, ours = await _fails(engine, statements, cid)
    assert isinstance(ours, StorageUnavailable)
    assert (ours.sqlstate, ours.error_class) == ("57014", "QueryCanceled")
    [record] = log_records.records
    assert record.levelno == logging.WARNING


# The server out of reach.


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_closed_port_is_unavailable(settings: Settings) -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    engine = make_async_engine(url, settings)
    try:
        with pytest.raises(Exception) as wrapped:  # noqa: PT011 (what it is, is the point)
            async with engine.connect():
                pass
    finally:
        await engine.dispose()
    assert isinstance(translate(wrapped.value), StorageUnavailable)

    with pytest.raises(psycopg.OperationalError) as raw:
        await psycopg.AsyncConnection.connect(libpq_url(url), connect_timeout=2)
    assert isinstance(translate(raw.value), StorageUnavailable)


async def test_a_full_sqlalchemy_pool_is_unavailable(database_url: str, settings: Settings) -> None:
    engine = make_async_engine(
        database_url, settings, pool_size=1, max_overflow=0, pool_timeout=0.1
    )
    try:
        async with engine.connect():
            with pytest.raises(Exception) as caught:  # noqa: PT011
                async with engine.connect():
                    pass
    finally:
        await engine.dispose()
    ours = translate(caught.value)
    assert isinstance(ours, StorageUnavailable)
    assert "pool" in ours.reason


async def test_a_full_psycopg_pool_is_unavailable(database_url: str) -> None:
    pool = psycopg_pool.AsyncConnectionPool(
        libpq_url(database_url), min_size=1, max_size=1, open=False
    )
    await pool.open(wait=True)
    try:
        async with pool.connection():
            with pytest.raises(psycopg_pool.PoolTimeout) as caught:
                async with pool.connection(timeout=0.1):
                    pass
    finally:
        await pool.close()
    assert isinstance(translate(caught.value), StorageUnavailable)


@pytest_asyncio.fixture
async def doomed(engine: AsyncEngine) -> AsyncIterator[tuple[AsyncConnection, int]]:
    """A connection, and its backend's pid, for another session to terminate."""
    async with engine.connect() as conn:
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        yield conn, int(pid)
        if not conn.invalidated:
            await conn.invalidate()


async def test_a_terminated_session_is_unavailable(
    engine: AsyncEngine, doomed: tuple[AsyncConnection, int], cid: uuid.UUID
) -> None:
    conn, pid = doomed
    async with engine.begin() as admin:
        await admin.execute(text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": pid})
    with pytest.raises(Exception) as caught:  # noqa: PT011
        await conn.execute(text("SELECT 1"))
    ours = translate(caught.value, conversation_id=cid)
    assert isinstance(ours, StorageUnavailable), caught.value


async def test_a_read_after_a_migration_changed_its_rows_types_is_unavailable_once(
    database_url: str, settings: Settings
) -> None:
    """A server whose prepared statements a migration (another process's)
    outdated answers 503, not 500, and the retry succeeds: the failed
    connection is dropped and the next prepares anew."""
    storage = await PostgresStorage.connect(
        database_url, options=settings.connection_options(), max_size=1
    )
    try:
        repository = Repository(storage)
        key = (await repository.create_conversation()).id
        await repository.append_messages(key, [Message(role="user", content="hi")])
        for _ in range(6):  # psycopg prepares a statement from its 5th run
            await repository.read_messages(key)
        async with await psycopg.AsyncConnection.connect(
            libpq_url(database_url), autocommit=True
        ) as other:
            await other.execute("ALTER TABLE messages ALTER COLUMN token_estimate TYPE bigint")
        with pytest.raises(StorageUnavailable, match="an upgrade ran"):
            await repository.read_messages(key)
        assert [m.content for m in await repository.read_messages(key)] == ["hi"]
    finally:
        await storage.close()
