"""Settings read from the environment, and the database URL's normal form.

`DATABASE_URL` may be a plain libpq URL (`postgresql://user@host:5432/db`,
also `postgres://`) or already name the driver (`postgresql+psycopg://`);
SQLAlchemy needs the driver named, so we add it. Unset means "start the
embedded server" (see `hosting.embedded`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from store.domain.commands import Limits
from store.domain.validation import DEFAULT_MAX_MESSAGES_PER_APPEND, MAX_MESSAGES_PER_APPEND
from store.postgres.group_commit import WRITERS
from store.postgres.urls import DRIVER_SCHEME, libpq_url, sqlalchemy_url

__all__ = ["DRIVER_SCHEME", "Settings", "libpq_url", "sqlalchemy_url"]

LOG_FORMATS = ("json", "text")
WRITE_STATEMENTS_ENV = "CONVO_WRITE_STATEMENTS"
MAX_WRITE_STATEMENTS = 16


def _int_env(name: str, default: int, unit: str, *, low: int = 0, high: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer number of {unit}, got {raw!r}") from None
    if value < low or (high is not None and value > high):
        upper = f"..{high}" if high is not None else " or more"
        raise ValueError(f"{name} must be {low}{upper} {unit}, got {value}")
    return value


def _float_env(name: str, default: float, unit: str) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of {unit}, got {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"{name} must be a finite number of {unit}, 0 or more, got {raw!r}")
    return value


def _choice_env(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = (os.environ.get(name) or default).lower()
    if raw not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


# Every environment variable the settings read: (name, field, what it sets).
# `convo config` lists them with their values.
VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("DATABASE_URL", "database_url", "the PostgreSQL server; unset: the embedded one"),
    ("CONVO_DATA_DIR", "data_dir", "where the embedded server keeps its data"),
    ("CONVO_STATEMENT_TIMEOUT_MS", "statement_timeout_ms", "every session's statement_timeout"),
    ("CONVO_LOCK_TIMEOUT_MS", "lock_timeout_ms", "every session's lock_timeout (then 409)"),
    (
        "CONVO_IDLE_IN_TRANSACTION_TIMEOUT_MS",
        "idle_in_transaction_timeout_ms",
        "every session's idle_in_transaction_session_timeout",
    ),
    ("CONVO_MAX_MESSAGE_CHARS", "max_message_chars", "a message's content, at most"),
    ("CONVO_MAX_MESSAGES_PER_APPEND", "max_messages_per_append", "messages in one append"),
    ("CONVO_MAX_BODY_BYTES", "max_body_bytes", "an HTTP request body (then 413)"),
    ("CONVO_DB_WAIT_S", "db_wait_s", "start-up: how long to wait for the database"),
    ("CONVO_SHUTDOWN_TIMEOUT_S", "shutdown_timeout_s", "shut-down: requests in flight"),
    ("CONVO_LOG_FORMAT", "log_format", "convo serve's log lines: json or text"),
    ("CONVO_LOG_LEVEL", "log_level", "debug, info, warning or error"),
    (
        WRITE_STATEMENTS_ENV,
        "write_statements",
        "append statements in flight at once (1 per worker of serve --workers)",
    ),
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    database_url: str | None
    # Every connection sets these. Appends are short; a statement or a lock
    # wait that runs long means something is wrong, and an idle transaction
    # holds back the global feed for every reader (see store.postgres.feed).
    statement_timeout_ms: int = 30_000
    lock_timeout_ms: int = 5_000
    idle_in_transaction_timeout_ms: int = 60_000
    data_dir: Path
    max_message_chars: int = 1_000_000
    max_messages_per_append: int = DEFAULT_MAX_MESSAGES_PER_APPEND
    # The HTTP server: a larger request body is refused (413) before it is read.
    max_body_bytes: int = 32 * 1024 * 1024
    # Start-up: how long to wait for the database to accept connections
    # (backing off between tries) before giving up with one line on stderr.
    db_wait_s: float = 30.0
    # Shut-down: how long in-flight requests may take to finish.
    shutdown_timeout_s: float = 10.0
    # Statements of optimistic appends this process keeps in flight at once
    # (store.postgres.group_commit). `convo serve --workers N` gives each
    # worker `WORKER_WRITE_STATEMENTS` unless this is set (api/server.py).
    write_statements: int = WRITERS
    log_format: str = "json"
    log_level: str = "INFO"

    @classmethod
    def from_env(cls) -> Settings:
        url = os.environ.get("DATABASE_URL") or None
        data_dir = os.environ.get("CONVO_DATA_DIR") or platformdirs.user_data_dir("convo-store")
        return cls(
            database_url=sqlalchemy_url(url) if url else None,
            statement_timeout_ms=_int_env("CONVO_STATEMENT_TIMEOUT_MS", 30_000, "milliseconds"),
            lock_timeout_ms=_int_env("CONVO_LOCK_TIMEOUT_MS", 5_000, "milliseconds"),
            idle_in_transaction_timeout_ms=_int_env(
                "CONVO_IDLE_IN_TRANSACTION_TIMEOUT_MS", 60_000, "milliseconds"
            ),
            data_dir=Path(data_dir),
            max_message_chars=_int_env("CONVO_MAX_MESSAGE_CHARS", 1_000_000, "characters", low=1),
            max_messages_per_append=_int_env(
                "CONVO_MAX_MESSAGES_PER_APPEND",
                DEFAULT_MAX_MESSAGES_PER_APPEND,
                "messages",
                low=1,
                high=MAX_MESSAGES_PER_APPEND,
            ),
            max_body_bytes=_int_env("CONVO_MAX_BODY_BYTES", 32 * 1024 * 1024, "bytes", low=1),
            db_wait_s=_float_env("CONVO_DB_WAIT_S", 30.0, "seconds"),
            shutdown_timeout_s=_float_env("CONVO_SHUTDOWN_TIMEOUT_S", 10.0, "seconds"),
            write_statements=_int_env(
                WRITE_STATEMENTS_ENV, WRITERS, "statements", low=1, high=MAX_WRITE_STATEMENTS
            ),
            log_format=_choice_env("CONVO_LOG_FORMAT", "json", LOG_FORMATS),
            log_level=_choice_env(
                "CONVO_LOG_LEVEL", "info", ("debug", "info", "warning", "error")
            ).upper(),
        )

    def connection_options(self) -> str:
        """libpq `options`: the timeouts every session starts with."""
        return " ".join(
            [
                f"-c statement_timeout={self.statement_timeout_ms}",
                f"-c lock_timeout={self.lock_timeout_ms}",
                f"-c idle_in_transaction_session_timeout={self.idle_in_transaction_timeout_ms}",
            ]
        )


def limits_from_settings(settings: Settings) -> Limits:
    """The limits commands enforce, as `settings` set them."""
    return Limits(
        max_message_chars=settings.max_message_chars,
        max_messages_per_append=settings.max_messages_per_append,
    )
