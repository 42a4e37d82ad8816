"""Every setting, read from the environment into one typed class.

`Settings.from_env()` reads `DATABASE_URL` and every `CONVO_*` variable
(pydantic-settings): each field's type and bounds are the rule, and a bad
value is refused with one line naming the variable and the problem
(`SettingsError`). `convo config` prints the effective values, secrets
masked (`Settings.effective()`).

`DATABASE_URL` may be a plain libpq URL (`postgresql://user@host:5432/db`,
also `postgres://`) or already name the driver (`postgresql+psycopg://`);
SQLAlchemy needs the driver named, so we add it. Unset means "start the
embedded server" (see `hosting.embedded`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
import psycopg
from psycopg.conninfo import conninfo_to_dict
from pydantic import AliasChoices, Field, HttpUrl, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy import make_url

from store.domain.commands import Limits
from store.domain.validation import DEFAULT_MAX_MESSAGES_PER_APPEND, MAX_MESSAGES_PER_APPEND
from store.postgres.group_commit import WRITERS
from store.postgres.urls import DRIVER_SCHEME, libpq_url, sqlalchemy_url

__all__ = ["DRIVER_SCHEME", "Settings", "SettingsError", "libpq_url", "sqlalchemy_url"]

PREFIX = "CONVO_"
WRITE_STATEMENTS_ENV = "CONVO_WRITE_STATEMENTS"
MAX_WRITE_STATEMENTS = 16
LOG_FORMATS = ("json", "text")
# Settings whose values `convo config` never prints in full.
SECRETS = frozenset({"database_url", "replica_urls", "summarizer_api_key"})
# Standbys a process reads from, at most, and how their URLs may start.
MAX_REPLICAS = 16
REPLICA_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")


class SettingsError(ValueError):
    """A setting's value is refused: the message is one line naming the variable."""


def _default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("convo-store"))


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Seconds = Annotated[float, Field(ge=0)]
Milliseconds = Annotated[int, Field(ge=0)]


class Settings(BaseSettings):
    """The settings of every command and of `convo serve` (frozen)."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        env_ignore_empty=True,
        case_sensitive=False,
        frozen=True,
        extra="ignore",
        validate_by_name=True,
        validate_default=True,
    )

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "database_url"),
        description="the PostgreSQL server; unset: the embedded one",
    )
    # Streaming standbys of DATABASE_URL's server (store.postgres.replicas).
    replica_urls: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="streaming standbys analysts' reads go to, comma-separated libpq URLs;"
        " unset: every read on the primary",
    )
    replica_max_lag_ms: int = Field(
        default=1000,
        ge=1,
        le=3_600_000,
        description="a standby further behind the primary is skipped (milliseconds)",
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir, description="where the embedded server keeps its data"
    )
    # Every connection sets these. Appends are short; a statement or a lock
    # wait that runs long means something is wrong, and an idle transaction
    # holds back the global feed for every reader (see store.postgres.feed).
    statement_timeout_ms: Milliseconds = Field(
        default=30_000, description="every session's statement_timeout (milliseconds)"
    )
    lock_timeout_ms: Milliseconds = Field(
        default=5_000, description="every session's lock_timeout, then 409 (milliseconds)"
    )
    idle_in_transaction_timeout_ms: Milliseconds = Field(
        default=60_000,
        description="every session's idle_in_transaction_session_timeout (milliseconds)",
    )
    max_message_chars: int = Field(
        default=1_000_000, ge=1, description="a message's content, at most (characters)"
    )
    max_messages_per_append: int = Field(
        default=DEFAULT_MAX_MESSAGES_PER_APPEND,
        ge=1,
        le=MAX_MESSAGES_PER_APPEND,
        description="messages in one append",
    )
    # The HTTP server: a larger request body is refused (413) before it is read.
    max_body_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1, description="an HTTP request body, then 413 (bytes)"
    )
    # Start-up: how long to wait for the database to accept connections
    # (backing off between tries) before giving up with one line on stderr.
    db_wait_s: Seconds = Field(
        default=30.0, description="start-up: how long to wait for the database (seconds)"
    )
    # Shut-down: how long in-flight requests may take to finish.
    shutdown_timeout_s: Seconds = Field(
        default=10.0, description="shut-down: how long requests in flight may take (seconds)"
    )
    # Statements of optimistic appends this process keeps in flight at once
    # (store.postgres.group_commit). `convo serve --workers N` gives each
    # worker `WORKER_WRITE_STATEMENTS` unless this is set (api/server.py).
    write_statements: int = Field(
        default=WRITERS,
        ge=1,
        le=MAX_WRITE_STATEMENTS,
        description="append statements in flight at once (1 per worker of serve --workers)",
    )
    # The storage's connection pool, per process (each worker of
    # `convo serve --workers N` has its own): docs/operations.md, sizing it.
    pool_size: int = Field(
        default=10, ge=1, le=1000, description="database connections per process, at most"
    )
    pool_wait_s: Seconds = Field(
        default=5.0,
        description="how long a request waits for a free connection, then 503 (seconds)",
    )
    # The HTTP server: how long a live API key's tenant is remembered
    # (hosting.keys: a revocation is seen at once; this bounds the rest).
    key_cache_s: Seconds = Field(
        default=60.0, description="how long an API key is remembered; 0: asked every request"
    )
    # Per API key and process, token buckets of requests and of request-body
    # bytes (api.ratelimit): over them a request is a 429; 0 turns one off.
    rate_limit_per_s: Seconds = Field(
        default=0.0, description="requests a second per API key; 0: none"
    )
    rate_limit_burst: int = Field(
        default=0, ge=0, description="requests at once per API key; 0: two seconds' worth"
    )
    rate_limit_bytes_per_s: int = Field(
        default=0, ge=0, description="request-body bytes a second per API key; 0: no limit"
    )
    rate_limit_bytes_burst: int = Field(
        default=0, ge=0, description="request-body bytes at once per API key; 0: two seconds'"
    )
    # Per tenant (api.quota): a create past the one, a write past the other, is a 403.
    tenant_max_conversations: int = Field(
        default=0, ge=0, description="conversations a tenant may hold; 0: no cap"
    )
    tenant_max_stored_bytes: int = Field(
        default=0, ge=0, description="bytes of event log a tenant may hold; 0: no cap"
    )
    cors_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="origins a browser may call the API from, comma-separated (* for any);"
        " unset: CORS off",
    )
    gzip_min_bytes: int = Field(
        default=4096,
        ge=0,
        description="responses at least this large are gzipped for clients that accept it",
    )
    log_format: Literal["json", "text"] = Field(
        default="json", description="convo serve's log lines: json or text"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="debug, info, warning or error"
    )
    # The model summarizer of `convo compact --summarizer openai-compatible`
    # and `POST /compactions` (docs/compaction.md, "A model summarizer").
    summarizer_url: HttpUrl | None = Field(
        default=None,
        description="an OpenAI-compatible endpoint's base URL (…/v1) for model summaries;"
        " unset: only the extractive summarizer",
    )
    summarizer_model: str | None = Field(
        default=None, min_length=1, max_length=200, description="the model that writes summaries"
    )
    summarizer_api_key: SecretStr | None = Field(
        default=None, description="the summarizer endpoint's API key (Bearer); unset: none"
    )
    summarizer_timeout_s: Seconds = Field(
        default=60.0, le=600, description="how long one summary request may take"
    )

    @field_validator("database_url", mode="after")
    @classmethod
    def _driver_named(cls, value: str | None) -> str | None:
        return sqlalchemy_url(value) if value else None

    @field_validator("replica_urls", mode="before")
    @classmethod
    def _replica_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(url.strip() for url in value.split(",") if url.strip())
        return value

    @field_validator("replica_urls", mode="after")
    @classmethod
    def _replica_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_REPLICAS:
            raise ValueError(f"at most {MAX_REPLICAS} replicas")
        for url in value:
            if len(url) > 2000 or not url.startswith(REPLICA_SCHEMES):
                raise ValueError("each replica is a postgresql:// URL")
            try:
                conninfo_to_dict(libpq_url(url))
            except (ValueError, psycopg.Error):
                raise ValueError("a replica's URL is not a valid libpq URL") from None
        if len(set(value)) != len(value):
            raise ValueError("a replica is named twice")
        return value

    @field_validator(
        "db_wait_s",
        "shutdown_timeout_s",
        "pool_wait_s",
        "key_cache_s",
        "summarizer_timeout_s",
        "rate_limit_per_s",
    )
    @classmethod
    def _finite_seconds(cls, value: float) -> float:
        return _finite(value)

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(origin.strip() for origin in value.split(",") if origin.strip())
        return value

    @classmethod
    def from_env(cls) -> Settings:
        """The settings from the environment; `SettingsError` for a bad value."""
        try:
            return cls()
        except ValidationError as error:
            raise SettingsError(describe(error)) from None

    def connection_options(self) -> str:
        """libpq `options`: the timeouts every session starts with."""
        return " ".join(
            [
                f"-c statement_timeout={self.statement_timeout_ms}",
                f"-c lock_timeout={self.lock_timeout_ms}",
                f"-c idle_in_transaction_session_timeout={self.idle_in_transaction_timeout_ms}",
            ]
        )

    def effective(self) -> list[tuple[str, str, str]]:
        """(variable, value as shown, what it sets) for every setting, secrets masked."""
        rows = []
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if value is None:
                shown = "(unset)"
            elif name in SECRETS and isinstance(value, tuple):
                shown = ",".join(_masked(url) for url in value) or "(none)"
            elif name in SECRETS:
                shown = _masked(str(value))
            elif isinstance(value, tuple):
                shown = ",".join(value) or "(none)"
            else:
                shown = str(value)
            rows.append((variable_of(name), shown, field.description or ""))
        return rows


def variable_of(field: str) -> str:
    """The environment variable that sets `field`."""
    return "DATABASE_URL" if field == "database_url" else PREFIX + field.upper()


def _masked(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "***"


def describe(error: ValidationError) -> str:
    """A refused setting in one line: the variable, the value, the problem."""
    problems = []
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else "settings"
        field = "database_url" if field == "DATABASE_URL" else field
        given = problem.get("input")
        shown = isinstance(given, str | int | float) and field not in SECRETS
        value = f" ({given!r})" if shown else ""
        message = str(problem["msg"]).removeprefix("Value error, ")
        variable = variable_of(field)
        if message.startswith(variable):  # the message names it already
            problems.append(message)
        else:
            problems.append(f"{variable}{value}: {message}")
    return "; ".join(problems)


# Every environment variable the settings read: (name, field, what it sets).
VARIABLES: tuple[tuple[str, str, str], ...] = tuple(
    (variable_of(name), name, field.description or "")
    for name, field in Settings.model_fields.items()
)


def limits_from_settings(settings: Settings) -> Limits:
    """The limits commands enforce, as `settings` set them."""
    return Limits(
        max_message_chars=settings.max_message_chars,
        max_messages_per_append=settings.max_messages_per_append,
    )
