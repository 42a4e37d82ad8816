"""Settings read from the environment, and the database URL's normal form.

`DATABASE_URL` may be a plain libpq URL (`postgresql://user@host:5432/db`,
also `postgres://`) or already name the driver (`postgresql+psycopg://`);
SQLAlchemy needs the driver named, so we add it. Unset means "start the
embedded server" (see `store.embedded`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from store.commands import Limits
from store.postgres.urls import DRIVER_SCHEME, libpq_url, sqlalchemy_url

__all__ = ["DRIVER_SCHEME", "Settings", "libpq_url", "sqlalchemy_url"]


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer number of milliseconds, got {raw!r}") from None


@dataclass(frozen=True, kw_only=True)
class Settings:
    database_url: str | None
    # Every connection sets these. Appends are short; a statement or a lock
    # wait that runs long means something is wrong, and an idle transaction
    # holds back the global feed for every reader (see store.log).
    statement_timeout_ms: int = 30_000
    lock_timeout_ms: int = 5_000
    idle_in_transaction_timeout_ms: int = 60_000
    data_dir: Path
    max_message_chars: int = 1_000_000

    @classmethod
    def from_env(cls) -> Settings:
        url = os.environ.get("DATABASE_URL") or None
        data_dir = os.environ.get("CONVO_DATA_DIR") or platformdirs.user_data_dir("convo-store")
        return cls(
            database_url=sqlalchemy_url(url) if url else None,
            statement_timeout_ms=_int_env("CONVO_STATEMENT_TIMEOUT_MS", 30_000),
            lock_timeout_ms=_int_env("CONVO_LOCK_TIMEOUT_MS", 5_000),
            idle_in_transaction_timeout_ms=_int_env("CONVO_IDLE_IN_TRANSACTION_TIMEOUT_MS", 60_000),
            data_dir=Path(data_dir),
            max_message_chars=_int_env("CONVO_MAX_MESSAGE_CHARS", 1_000_000),
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
    return Limits(max_message_chars=settings.max_message_chars)
