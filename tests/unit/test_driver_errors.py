"""store.postgres.driver_errors.translate on constructed driver errors: raw
psycopg, wrapped by SQLAlchemy, the pools', the network's; and the constraint
table kept in step with the schema's names."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import uuid
from pathlib import Path

import psycopg
import psycopg.errors
import psycopg_pool
import pytest
from psycopg.pq import DiagnosticField
from sqlalchemy import CheckConstraint, ForeignKeyConstraint, PrimaryKeyConstraint, UniqueConstraint
from sqlalchemy import exc as sa_exc

from hosting.engines import make_async_engine, make_sync_engine
from hosting.keys import api_keys
from hosting.settings import Settings
from store.domain.errors import (
    DEFAULT_RETRY_AFTER,
    ConcurrencyConflict,
    ConversationBusy,
    ConversationNotFound,
    ConvoStoreError,
    IdempotencyConflict,
    StorageError,
    StorageUnavailable,
)
from store.postgres.driver_errors import (
    CONSTRAINT_ERRORS,
    RETIRED_CONSTRAINTS,
    Violation,
    constraint_name,
    translate,
)
from store.postgres.schema import events, metadata
from store.postgres.tables import PROJECTION_TABLES

# Importing them puts their tables on `metadata`.
SCHEMA_TABLES = (events, api_keys, *PROJECTION_TABLES)

CID = uuid.UUID(int=7)
SECRET = "the user's secret message"
STATEMENT = "INSERT INTO events (data) VALUES (%(data)s)"


def _violation(kind: type[psycopg.Error], constraint: str | None, sqlstate: str) -> psycopg.Error:
    """A driver error as the server reports it: its message quotes the row."""
    info: dict[int, bytes | None] = {DiagnosticField.SQLSTATE: sqlstate.encode()}
    if constraint is not None:
        info[DiagnosticField.CONSTRAINT_NAME] = constraint.encode()
    return kind(f"violation\nDETAIL: Failing row contains ({SECRET})", info=info)


def _wrapped(orig: BaseException, *, invalidated: bool = False) -> sa_exc.DBAPIError:
    """As SQLAlchemy raises it, parameters and all."""
    wrapped = sa_exc.DBAPIError.instance(
        STATEMENT,
        {"data": SECRET},
        orig,
        psycopg.Error,
        hide_parameters=True,
        connection_invalidated=invalidated,
    )
    assert isinstance(wrapped, sa_exc.DBAPIError)
    return wrapped


def _both(orig: psycopg.Error) -> list[BaseException]:
    return [orig, _wrapped(orig)]


# Busy: another transaction is in the way.


@pytest.mark.parametrize(
    "orig",
    [
        psycopg.errors.LockNotAvailable("canceling statement due to lock timeout"),
        psycopg.errors.SerializationFailure("could not serialize access"),
        psycopg.errors.DeadlockDetected("deadlock detected"),
    ],
    ids=type,
)
def test_a_lock_timeout_a_serialization_failure_or_a_deadlock_is_busy(orig: psycopg.Error) -> None:
    for error in _both(orig):
        ours = translate(error, conversation_id=CID)
        assert isinstance(ours, ConversationBusy)
        assert ours.conversation_id == CID
        assert ours.retry_after == DEFAULT_RETRY_AFTER
        assert ours.sqlstate == orig.sqlstate
        assert ours.error_class == type(orig).__name__


def test_busy_without_a_conversation() -> None:
    ours = translate(psycopg.errors.LockNotAvailable("x"))
    assert isinstance(ours, ConversationBusy)
    assert ours.conversation_id is None


# Unavailable: the database cannot serve now.


@pytest.mark.parametrize(
    "orig",
    [
        psycopg.OperationalError("connection failed: Connection refused"),
        psycopg.errors.ConnectionFailure("connection failure"),
        psycopg.errors.lookup("08001")("could not connect"),
        psycopg.errors.lookup("08003")("connection does not exist"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CrashShutdown("terminating connection because of crash"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.lookup("57P05")("terminating connection due to idle-session timeout"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.errors.TooManyConnections("sorry, too many clients already"),
        psycopg.errors.DiskFull("could not extend file"),
        psycopg.errors.OutOfMemory("out of memory"),
        psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"),
        psycopg.errors.IdleInTransactionSessionTimeout("terminating connection due to idle"),
        psycopg_pool.PoolTimeout("couldn't get a connection after 30.00 sec"),
        psycopg_pool.TooManyRequests("the pool has already 10 requests waiting"),
        psycopg_pool.PoolClosed("the pool is closed"),
    ],
    ids=lambda e: f"{type(e).__name__}-{getattr(e, 'sqlstate', None)}",
)
def test_the_database_out_of_reach_is_unavailable(orig: psycopg.Error) -> None:
    for error in _both(orig):
        ours = translate(error, conversation_id=CID)
        assert isinstance(ours, StorageUnavailable), error
        assert ours.retry_after == DEFAULT_RETRY_AFTER
        assert ours.error_class == type(orig).__name__
        assert ours.sqlstate == orig.sqlstate


@pytest.mark.parametrize(
    "error",
    [
        sa_exc.TimeoutError("QueuePool limit of size 10 overflow 20 reached"),
        sa_exc.DisconnectionError("connection lost"),
        ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
        socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
        OSError(errno.ENETUNREACH, "Network is unreachable"),
        OSError(errno.EHOSTUNREACH, "No route to host"),
        TimeoutError(errno.ETIMEDOUT, "Connection timed out"),
    ],
    ids=type,
)
def test_pools_and_the_network_failing_are_unavailable(error: BaseException) -> None:
    ours = translate(error)
    assert isinstance(ours, StorageUnavailable)
    assert ours.error_class == type(error).__name__


def test_a_wrapped_error_that_invalidated_its_connection_is_unavailable() -> None:
    orig = psycopg.InterfaceError("the connection is lost")
    assert isinstance(translate(_wrapped(orig)), StorageError)
    assert isinstance(translate(_wrapped(orig, invalidated=True)), StorageUnavailable)


# Everything else the driver raises: a StorageError.


@pytest.mark.parametrize(
    "orig",
    [
        psycopg.errors.UndefinedTable('relation "evnts" does not exist'),
        psycopg.errors.SyntaxError("syntax error at or near"),
        psycopg.errors.InvalidTextRepresentation(f'invalid input syntax: "{SECRET}"'),
        psycopg.errors.ProgramLimitExceeded("index row size exceeds btree maximum"),
        psycopg.errors.lookup("XX000")("internal error"),
        psycopg.errors.lookup("58030")("could not read block"),
        psycopg.InterfaceError("the cursor is closed"),
        psycopg.ProgrammingError("the query has 2 placeholders but 1 parameters were passed"),
        psycopg.errors.PipelineAborted("pipeline aborted"),
    ],
    ids=type,
)
def test_any_other_driver_error_is_a_storage_error(orig: psycopg.Error) -> None:
    for error in _both(orig):
        ours = translate(error, conversation_id=CID)
        assert isinstance(ours, StorageError), error
        assert ours.retry_after is None
        assert not ours.retryable
        assert ours.error_class == type(orig).__name__
        assert ours.sqlstate == orig.sqlstate
        assert SECRET not in str(ours)


def test_a_wrapped_error_of_another_driver_is_a_storage_error() -> None:
    error = sa_exc.DBAPIError("SELECT 1", None, ValueError("not a psycopg error"))
    ours = translate(error)
    assert isinstance(ours, StorageError)
    assert ours.error_class == "ValueError"


# Not driver errors: the caller re-raises them as they are.


@pytest.mark.parametrize(
    "error",
    [
        ValueError("a bug"),
        RuntimeError("a bug"),
        KeyError("x"),
        ConversationNotFound(CID),
        ConcurrencyConflict(CID, 1, 2),
        StorageError(sqlstate="23514", error_class="CheckViolation"),
        sa_exc.NoResultFound("no row"),
        sa_exc.ResourceClosedError("closed"),
        sa_exc.StatementError("bind failed", STATEMENT, {"data": SECRET}, TypeError("no")),
        asyncio.CancelledError(),
        TimeoutError(),  # asyncio.timeout around our own code: not the network
        FileNotFoundError(errno.ENOENT, "no such file"),
        KeyboardInterrupt(),
    ],
    ids=type,
)
def test_what_is_not_a_driver_error_is_left_alone(error: BaseException) -> None:
    assert translate(error, conversation_id=CID) is None


# Constraint violations, by name.


def _violated(constraint: str | None, sqlstate: str = "23505") -> psycopg.Error:
    kind = psycopg.errors.lookup(sqlstate)
    return _violation(kind, constraint, sqlstate)


@pytest.mark.parametrize("constraint", ["pk_events", "uq_events_stream_version"])
def test_the_stream_version_key_is_a_lost_race(constraint: str) -> None:
    for error in _both(_violated(constraint)):
        ours = translate(error, conversation_id=CID)
        assert isinstance(ours, ConcurrencyConflict)
        assert ours.conversation_id == CID
        assert "another writer" in str(ours)


@pytest.mark.parametrize(
    "constraint", ["uq_events_client_id", "uq_messages_client_message_id", "pk_append_requests"]
)
def test_client_ids_and_idempotency_keys_are_idempotency_conflicts(constraint: str) -> None:
    for error in _both(_violated(constraint)):
        ours = translate(error, conversation_id=CID)
        assert isinstance(ours, IdempotencyConflict)
        assert ours.key is None
        assert SECRET not in str(ours)


@pytest.mark.parametrize(
    ("constraint", "sqlstate"),
    [
        ("ck_events_version_positive", "23514"),
        ("ck_messages_role_known", "23514"),
        ("fk_events_conversation_id_conversations", "23503"),
        ("pk_messages", "23505"),
        ("uq_messages_sort_key", "23505"),
        ("message_role_index_user_pkey", "23505"),  # a partition's own name (before 0012)
        ("no_such_constraint", "23505"),
        (None, "23502"),  # not null: no constraint name
    ],
)
def test_other_violations_are_bugs(constraint: str | None, sqlstate: str) -> None:
    for error in _both(_violated(constraint, sqlstate)):
        ours = translate(error, conversation_id=CID)
        assert isinstance(ours, StorageError)
        assert ours.sqlstate == sqlstate
        assert SECRET not in str(ours)


def test_constraint_name_reads_raw_and_wrapped_errors() -> None:
    orig = _violated("pk_append_requests")
    assert constraint_name(orig) == "pk_append_requests"
    assert constraint_name(_wrapped(orig)) == "pk_append_requests"
    assert constraint_name(_wrapped(psycopg.errors.LockNotAvailable("x"))) is None
    assert constraint_name(ValueError("x")) is None


# The table and the schema's names stay in step.


def _schema_names() -> dict[str, str]:
    """Every named constraint and unique index of the schema → its kind."""
    assert all(table.metadata is metadata for table in SCHEMA_TABLES)
    names: dict[str, str] = {}
    for table in metadata.tables.values():
        for constraint in table.constraints:
            kinds = {
                PrimaryKeyConstraint: "primary key",
                UniqueConstraint: "unique",
                CheckConstraint: "check",
                ForeignKeyConstraint: "foreign key",
            }
            kind = next((k for t, k in kinds.items() if isinstance(constraint, t)), None)
            if kind is not None and isinstance(constraint.name, str):
                names[constraint.name] = kind
        for index in table.indexes:
            if index.unique and isinstance(index.name, str):
                names[index.name] = "unique"
    return names


def test_every_schema_constraint_has_a_decision_and_every_decision_a_constraint() -> None:
    names = set(_schema_names())
    assert set(CONSTRAINT_ERRORS) == names | RETIRED_CONSTRAINTS, (
        f"without a decision: {sorted(names - set(CONSTRAINT_ERRORS))}; "
        f"neither in the schema nor retired: "
        f"{sorted(set(CONSTRAINT_ERRORS) - names - RETIRED_CONSTRAINTS)}"
    )


def _stream_version_keys() -> set[str]:
    """The primary or unique keys of `events` on exactly (conversation_id, version)."""
    return {
        str(c.name)
        for c in events.constraints
        if isinstance(c, PrimaryKeyConstraint | UniqueConstraint)
        and {column.name for column in c.columns} == {"conversation_id", "version"}
    }


def _decision(name: str) -> ConvoStoreError:
    return CONSTRAINT_ERRORS[name](Violation(name, CID, "23505", "UniqueViolation"))


def test_a_check_or_foreign_key_violation_is_a_bug() -> None:
    for name, kind in _schema_names().items():
        if kind in ("check", "foreign key"):
            assert isinstance(_decision(name), StorageError), name


def test_only_the_stream_version_keys_and_creation_are_conflicts() -> None:
    conflicts = {n for n in CONSTRAINT_ERRORS if isinstance(_decision(n), ConcurrencyConflict)}
    assert conflicts - RETIRED_CONSTRAINTS == _stream_version_keys() | {"pk_conversations"}
    assert "pk_events" in _stream_version_keys()


def test_only_client_ids_and_idempotency_keys_are_idempotency_conflicts() -> None:
    idempotent = {n for n in CONSTRAINT_ERRORS if isinstance(_decision(n), IdempotencyConflict)}
    assert idempotent == {
        "uq_events_client_id",
        "uq_messages_client_message_id",
        "pk_append_requests",
    }


# The log: one line for a StorageError or StorageUnavailable, and no content.


def test_a_storage_error_logs_one_line_without_statement_or_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="convo.storage")
    translate(_wrapped(_violated("ck_events_version_positive", "23514")), conversation_id=CID)
    [record] = caplog.records
    assert record.name == "convo.storage"
    assert record.levelno == logging.ERROR
    line = record.getMessage()
    assert "CheckViolation" in line
    assert "23514" in line
    assert "ck_events_version_positive" in line
    assert str(CID) in line
    assert SECRET not in caplog.text
    assert "INSERT" not in caplog.text
    assert record.exc_info is None


def test_unavailable_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="convo.storage")
    translate(_wrapped(psycopg.errors.QueryCanceled(f"canceling: {SECRET}")))
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "QueryCanceled" in record.getMessage()
    assert "57014" in record.getMessage()
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.LockNotAvailable("x"),
        _violated("uq_events_stream_version"),
        _violated("pk_append_requests"),
        ValueError("not ours"),
    ],
    ids=type,
)
def test_busy_conflicts_and_non_driver_errors_log_nothing(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="convo.storage")
    translate(error, conversation_id=CID)
    assert caplog.records == []


# The engines hide parameters.


def test_engines_hide_statement_parameters(tmp_path: Path) -> None:
    settings = Settings(database_url=None, data_dir=tmp_path)
    url = "postgresql://postgres@127.0.0.1:1/nowhere"
    sync_engine = make_sync_engine(url, settings)
    async_engine = make_async_engine(url, settings)
    try:
        assert sync_engine.hide_parameters
        assert async_engine.sync_engine.hide_parameters
    finally:
        sync_engine.dispose()
    with pytest.raises(TypeError):
        make_sync_engine(url, settings, hide_parameters=False)
