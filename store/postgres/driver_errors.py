"""The driver boundary: psycopg's and SQLAlchemy's errors become ours.

The PostgreSQL storage calls `translate` on every exception that escapes a
transaction:

    except Exception as error:
        ours = translate(error, conversation_id=cid)
        if ours is None:
            raise
        raise ours from error

`translate` takes the raw driver errors (`psycopg.Error` and its SQLSTATE
subclasses, `psycopg_pool.PoolTimeout`, a network `OSError` while
connecting) and the same errors wrapped by SQLAlchemy (`DBAPIError` and its
`.orig`; `sqlalchemy.exc.TimeoutError` when SQLAlchemy's own pool is full).
Anything else (our own errors, a bug in Python code) is not a driver error:
it returns None and the caller re-raises it unchanged.

    what the driver raised                                   what we raise
    23*** a violation of a named constraint                  CONSTRAINT_ERRORS[its name]
    23*** any other (unlisted name, not null)                StorageError
    55P03 lock_not_available (lock_timeout)                  ConversationBusy
    40001 serialization_failure, 40P01 deadlock_detected     ConversationBusy
    08*** connection exceptions                              StorageUnavailable
    57P01..57P05 shutdown, terminated, cannot connect now    StorageUnavailable
    57014 query_canceled (statement_timeout)                 StorageUnavailable
    53*** insufficient resources (disk, memory, slots)       StorageUnavailable
    25006 read-only transaction (a standby, mid-failover)    StorageUnavailable
    25P03 idle-in-transaction timeout                        StorageUnavailable
    0A000 from RevalidateCachedQuery: a prepared statement   StorageUnavailable
      whose result's types a migration changed meanwhile
    an OperationalError without SQLSTATE (no connection)     StorageUnavailable
      (but PipelineAborted: an earlier failure went unseen)   StorageError
    PoolTimeout, TooManyRequests, PoolClosed (psycopg_pool)  StorageUnavailable
    sqlalchemy.exc.TimeoutError (QueuePool limit reached)    StorageUnavailable
    a DBAPIError that invalidated its connection             StorageUnavailable
    ConnectionError, socket.gaierror, network OSErrors       StorageUnavailable
    any other psycopg error (42***, 54***, 58***, XX***...)  StorageError

Why `statement_timeout` is `StorageUnavailable`, not `StorageError`: our
statements are short and indexed, and lock waits end earlier, at
`lock_timeout` (5 s < 30 s); a statement that still runs 30 s means the
server is saturated (I/O, CPU, a vacuum), which passes. The transaction was
rolled back, so a retry is safe, and the warning logged here (class
`QueryCanceled`, SQLSTATE 57014) tells an operator to look. An
administrator's `pg_cancel_backend` raises the same SQLSTATE and is
transient too.

Nothing here puts the statement, its parameters or the server's message in
our errors or in the log: the server's message can quote stored values (a
unique violation's `DETAIL: Key (...)=(...)`, a check violation's "Failing
row contains (...)"), and message content must never reach logs. Only the
SQLSTATE, the driver's class name, the constraint name and the conversation
id are kept. (psycopg never puts parameters in its errors; the SQLAlchemy
engines of `hosting.engines` hide them from theirs.) One way out
remains: `raise ours from error` keeps the driver's error as `__cause__`,
so a printed traceback of ours (`logger.exception`, an uncaught error in a
CLI) prints the server's message too. Log our errors by class and message,
not with their traceback.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import psycopg
import psycopg.errors
import psycopg_pool
from sqlalchemy import exc as sa_exc

from store.domain.errors import (
    ConcurrencyConflict,
    ConversationBusy,
    ConvoStoreError,
    IdempotencyConflict,
    StorageError,
    StorageUnavailable,
)

log = logging.getLogger("convo.storage")


@dataclass(frozen=True, slots=True)
class Violation:
    """What a factory in CONSTRAINT_ERRORS gets to build our error from."""

    constraint: str
    conversation_id: object | None
    sqlstate: str | None
    error_class: str


ErrorFactory = Callable[[Violation], ConvoStoreError]


def _lost_race(violation: Violation) -> ConvoStoreError:
    return ConcurrencyConflict.lost_race(violation.conversation_id)


def _client_id_reused(violation: Violation) -> ConvoStoreError:
    return IdempotencyConflict(
        None, "a client message id in this append is already stored in this conversation"
    )


def _key_raced(violation: Violation) -> ConvoStoreError:
    return IdempotencyConflict(
        None,
        "a concurrent append with the same idempotency key was stored first;"
        " retry it to get that append's result",
    )


def _bug(violation: Violation) -> ConvoStoreError:
    return StorageError(sqlstate=violation.sqlstate, error_class=violation.error_class)


# Every named constraint and unique index of the schema (`store.postgres.schema`,
# `store.postgres.tables`, `hosting.keys`), each with a decision; a
# test keeps this table and the schema's names in step. A violation of a
# constraint not listed is a StorageError.
#
# Only three things are a caller's affair: the stream-version key (another
# writer got the version first: the row lock's backstop), and the client id /
# idempotency key uniques (a retry raced its first attempt, or reuses an id).
# Every other key is derived under the conversation's row lock from the log
# (seq, sort key, batch number, call ids already validated), and every
# check constraint guards a value our own code computes: a violation there
# is a bug, and retrying the same request would fail the same way.
CONSTRAINT_ERRORS: Final[Mapping[str, ErrorFactory]] = MappingProxyType(
    {
        # store.postgres.schema: the event log
        # Two creators of one id (the stream row is created with ON CONFLICT
        # DO NOTHING, so only a new insert path could get here).
        "pk_conversations": _lost_race,
        "ck_conversations_version_not_negative": _bug,
        # (conversation_id, version): the backstop of the stream row lock.
        "pk_events": _lost_race,
        "ck_events_version_positive": _bug,
        "pk_append_requests": _key_raced,
        # store.postgres.tables: maintained under the row lock
        "pk_messages": _bug,
        "uq_messages_client_message_id": _client_id_reused,
        "ck_messages_role_known": _bug,
        "uq_messages_role_system": _bug,
        "uq_messages_role_user": _bug,
        "uq_messages_role_assistant": _bug,
        "uq_messages_role_tool": _bug,
        "pk_batches": _bug,
        "pk_batch_carried": _bug,
        "pk_tool_calls": _bug,  # duplicate call ids are InvalidMessage before any insert
        "ck_tool_calls_status_known": _bug,
        "pk_agent_profiles": _bug,  # upserted: ON CONFLICT … DO UPDATE
        "pk_context_slots": _bug,  # upserted: ON CONFLICT … DO UPDATE
        # hosting.keys: random ids and 32 random bytes; a clash is a bug
        "pk_api_keys": _bug,
        "uq_api_keys_key_hash": _bug,
        # The scope is written by hosting.keys from its two names only.
        "ck_api_keys_scope": _bug,
        # Retired by migration 0004 (a database below it, or downgraded):
        # the same decisions as their successors'.
        "uq_events_stream_version": _lost_race,
        "uq_events_client_id": _client_id_reused,
        "pk_conversation_heads": _bug,
        "uq_messages_sort_key": _bug,
        # An event without its conversation row would have skipped the stream lock.
        "fk_events_conversation_id_conversations": _bug,
        # Retired by migration 0011 (renamed with its table, `batch_carried`).
        "pk_batch_members": _bug,
        # Retired by migration 0012 (the per-role indexes of `messages`).
        "pk_message_role_index": _bug,
    }
)
RETIRED_CONSTRAINTS: Final = frozenset(
    {
        "uq_events_stream_version",
        "uq_events_client_id",
        "pk_conversation_heads",
        "uq_messages_sort_key",
        "fk_events_conversation_id_conversations",
        "pk_batch_members",
        "pk_message_role_index",
    }
)

# Retrying helps: another transaction was in the way.
BUSY_SQLSTATES: Final = frozenset({"55P03", "40001", "40P01"})

# SQLSTATE (or its two-character class) → why the storage is unavailable.
UNAVAILABLE_SQLSTATES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "08": "the connection to the database failed",
        "53": "the database is out of resources (connections, memory or disk)",
        "57014": "a statement ran past statement_timeout or was cancelled",
        "57P01": "the server ended the session (shutdown or an administrator)",
        "57P02": "the database is shutting down",
        "57P03": "the database is not accepting connections yet",
        "57P04": "the database was dropped",
        "57P05": "the server closed an idle session",
        "25006": "the database accepts no writes (read-only, e.g. during a failover)",
        "25P03": "the server closed a transaction left idle too long",
    }
)

_PLAN_CACHE: Final = "RevalidateCachedQuery"
_SCHEMA_CHANGED: Final = (
    "the database's tables changed under this connection's prepared statements"
    " (an upgrade ran); retry"
)

NETWORK_ERRNOS: Final = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.EPIPE,
        errno.ETIMEDOUT,
        errno.EHOSTUNREACH,
        errno.EHOSTDOWN,
        errno.ENETUNREACH,
        errno.ENETDOWN,
        errno.EADDRNOTAVAIL,
    }
)

_POOL_EXHAUSTED = (
    "no database connection free in time (pool exhausted, or the database unreachable)"
)


def translate(
    error: BaseException, *, conversation_id: object | None = None
) -> ConvoStoreError | None:
    """Our error for a driver error, or None if `error` is not one (re-raise it).

    Logs one line (logger `convo.storage`) for a StorageError or a
    StorageUnavailable: class, SQLSTATE, conversation id; never the
    statement, its parameters or the server's message.
    """
    translated = _translate(error, conversation_id)
    if translated is None:
        return None
    ours, constraint = translated
    if isinstance(ours, StorageError | StorageUnavailable):
        _log(ours, conversation_id, constraint)
    return ours


def _translate(
    error: BaseException, conversation_id: object | None
) -> tuple[ConvoStoreError, str | None] | None:
    if isinstance(error, ConvoStoreError):
        return None
    if isinstance(error, sa_exc.TimeoutError):
        return StorageUnavailable(_POOL_EXHAUSTED, error_class=type(error).__name__), None
    if isinstance(error, sa_exc.DBAPIError):
        orig = error.orig
        if isinstance(orig, psycopg.Error):
            ours, constraint = _from_psycopg(orig, conversation_id)
        elif isinstance(orig, BaseException) and (network := _from_network(orig)) is not None:
            ours, constraint = network, None
        else:
            kind = type(orig).__name__ if isinstance(orig, BaseException) else type(error).__name__
            ours, constraint = StorageError(error_class=kind), None
        if isinstance(ours, StorageError) and error.connection_invalidated:
            # SQLAlchemy recognised a disconnect the SQLSTATE did not say.
            return StorageUnavailable(
                "the connection to the database was lost",
                sqlstate=ours.sqlstate,
                error_class=ours.error_class,
            ), None
        return ours, constraint
    if isinstance(error, sa_exc.DisconnectionError):
        return StorageUnavailable(
            "the connection to the database was lost", error_class=type(error).__name__
        ), None
    if isinstance(error, psycopg.Error):
        return _from_psycopg(error, conversation_id)
    network = _from_network(error)
    return None if network is None else (network, None)


def constraint_name(error: BaseException) -> str | None:
    """The constraint a statement violated (unique, foreign key, check), raw
    or wrapped by SQLAlchemy; None for any other error."""
    orig = error.orig if isinstance(error, sa_exc.DBAPIError) else error
    if isinstance(orig, psycopg.IntegrityError):
        name = orig.diag.constraint_name
        return str(name) if name else None
    return None


def _sqlstate(error: psycopg.Error) -> str | None:
    state = error.sqlstate or error.diag.sqlstate
    return str(state) if state else None


def _from_psycopg(
    error: psycopg.Error, conversation_id: object | None
) -> tuple[ConvoStoreError, str | None]:
    kind = type(error).__name__
    if isinstance(error, psycopg_pool.PoolTimeout | psycopg_pool.TooManyRequests):
        return StorageUnavailable(_POOL_EXHAUSTED, error_class=kind), None
    if isinstance(error, psycopg_pool.PoolClosed):
        return StorageUnavailable("the connection pool is closed", error_class=kind), None
    sqlstate = _sqlstate(error)
    if sqlstate in BUSY_SQLSTATES:
        return ConversationBusy(conversation_id, sqlstate=sqlstate, error_class=kind), None
    if isinstance(error, psycopg.IntegrityError) or (sqlstate or "").startswith("23"):
        constraint = error.diag.constraint_name or None
        violation = Violation(
            constraint=constraint or "",
            conversation_id=conversation_id,
            sqlstate=sqlstate,
            error_class=kind,
        )
        return CONSTRAINT_ERRORS.get(violation.constraint, _bug)(violation), constraint
    if sqlstate == "0A000" and error.diag.source_function == _PLAN_CACHE:
        # "cached plan must not change result type": a migration (another
        # process's) changed a table this connection had prepared statements
        # on. The connection is dropped (our reads and writes close a
        # connection after any driver error); the next one prepares anew, so
        # a retry succeeds. Told by the server's function, not its message,
        # which `lc_messages` may translate.
        return StorageUnavailable(_SCHEMA_CHANGED, sqlstate=sqlstate, error_class=kind), None
    if isinstance(error, psycopg.errors.PipelineAborted):
        # A statement after one that failed in the same pipeline: the first
        # failure is the one to report; getting here is a bug of ours.
        return StorageError(sqlstate=sqlstate, error_class=kind), None
    reason = _unavailable_reason(sqlstate)
    if reason is None and sqlstate is None and isinstance(error, psycopg.OperationalError):
        # Raised by the client, not the server: no connection, or it broke.
        reason = "the database cannot be reached or the connection was lost"
    if reason is not None:
        return StorageUnavailable(reason, sqlstate=sqlstate, error_class=kind), None
    return StorageError(sqlstate=sqlstate, error_class=kind), None


def _unavailable_reason(sqlstate: str | None) -> str | None:
    if sqlstate is None:
        return None
    return UNAVAILABLE_SQLSTATES.get(sqlstate) or UNAVAILABLE_SQLSTATES.get(sqlstate[:2])


def _from_network(error: BaseException) -> StorageUnavailable | None:
    """A network failure that reached us without the driver wrapping it."""
    kind = type(error).__name__
    if isinstance(error, socket.gaierror):
        return StorageUnavailable("the database host name does not resolve", error_class=kind)
    if isinstance(error, ConnectionError) or (
        isinstance(error, OSError) and error.errno in NETWORK_ERRNOS
    ):
        return StorageUnavailable("the database cannot be reached", error_class=kind)
    return None


def _log(
    ours: StorageError | StorageUnavailable, conversation_id: object | None, constraint: str | None
) -> None:
    # One line of fixed fields: never the statement, its parameters or the
    # server's message, and no traceback (its text would quote them).
    if isinstance(ours, StorageError):
        level, what = logging.ERROR, "storage error"
    else:
        level, what = logging.WARNING, f"storage unavailable ({ours.reason})"
    fields = [f"{ours.error_class or '-'}", f"SQLSTATE {ours.sqlstate or '-'}"]
    if constraint:
        fields.append(f"constraint {constraint}")
    fields.append(f"conversation {'-' if conversation_id is None else conversation_id}")
    log.log(
        level,
        "%s: %s",
        what,
        ", ".join(fields),
        extra={
            "error_class": ours.error_class,
            "sqlstate": ours.sqlstate,
            "constraint": constraint,
            "conversation_id": None if conversation_id is None else str(conversation_id),
        },
    )


__all__ = [
    "BUSY_SQLSTATES",
    "CONSTRAINT_ERRORS",
    "RETIRED_CONSTRAINTS",
    "UNAVAILABLE_SQLSTATES",
    "ErrorFactory",
    "Violation",
    "constraint_name",
    "translate",
]
