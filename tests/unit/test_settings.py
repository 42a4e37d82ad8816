"""DATABASE_URL spellings, the timeouts every connection sets, the append
statements each process keeps in flight, and how a bad value is refused
(hosting.settings: one pydantic-settings class)."""

from __future__ import annotations

import os

import pytest

from api.server import WORKER_DATABASE_URL, WORKER_WRITE_STATEMENTS, prepare_worker_environment
from hosting.bootstrap import open_storage
from hosting.settings import VARIABLES, Settings, SettingsError, libpq_url, sqlalchemy_url
from store.postgres import PostgresStorage
from store.postgres.group_commit import WRITERS


def settings_from(monkeypatch: pytest.MonkeyPatch, environment: dict[str, str]) -> Settings:
    """The settings read with `environment` set."""
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    return Settings.from_env()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u@h:5432/db", "postgresql+psycopg://u@h:5432/db"),
        ("postgres://u:p@h/db", "postgresql+psycopg://u:p@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
    ],
)
def test_plain_libpq_urls_get_the_driver_named(given: str, expected: str) -> None:
    assert sqlalchemy_url(given) == expected
    assert libpq_url(given) == expected.replace("postgresql+psycopg", "postgresql")


@pytest.mark.parametrize("bad", ["mysql://u@h/db", "not a url"])
def test_other_urls_are_refused_with_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="DATABASE_URL"):
        sqlalchemy_url(bad)


def test_timeouts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from(
        monkeypatch, {"DATABASE_URL": "postgresql://u@h/db", "CONVO_STATEMENT_TIMEOUT_MS": "1234"}
    )
    assert settings.database_url == "postgresql+psycopg://u@h/db"
    options = settings.connection_options()
    assert "-c statement_timeout=1234" in options
    assert "-c lock_timeout=5000" in options
    assert "-c idle_in_transaction_session_timeout=60000" in options


def test_append_statements_in_flight_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CONVO_WRITE_STATEMENTS", raising=False)
    assert Settings.from_env().write_statements == WRITERS
    monkeypatch.setenv("CONVO_WRITE_STATEMENTS", "3")
    assert Settings.from_env().write_statements == 3


@pytest.mark.parametrize(
    ("variable", "bad"),
    [
        ("CONVO_LOCK_TIMEOUT_MS", "soon"),
        ("CONVO_WRITE_STATEMENTS", "0"),
        ("CONVO_WRITE_STATEMENTS", "17"),
        ("CONVO_WRITE_STATEMENTS", "two"),
        ("CONVO_REPLICA_URLS", "mysql://u@a/db"),
        ("CONVO_REPLICA_URLS", "postgresql://u@a/db,postgresql://u@a/db"),
        ("CONVO_REPLICA_URLS", ",".join(f"postgresql://u@h{n}/db" for n in range(17))),
        ("CONVO_REPLICA_URLS", "postgresql://u@a/db?sslmode=maybe&=x"),
        ("CONVO_REPLICA_MAX_LAG_MS", "0"),
        ("CONVO_REPLICA_MAX_LAG_MS", "soon"),
    ],
)
def test_a_bad_value_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, bad: str
) -> None:
    monkeypatch.setenv(variable, bad)
    with pytest.raises(ValueError, match=variable):
        Settings.from_env()


def test_each_worker_process_keeps_one_append_statement_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CONVO_WRITE_STATEMENTS", raising=False)
    monkeypatch.delenv(WORKER_DATABASE_URL, raising=False)
    prepare_worker_environment("postgresql://u@h/db")
    assert os.environ[WORKER_DATABASE_URL] == "postgresql://u@h/db"
    assert Settings.from_env().write_statements == WORKER_WRITE_STATEMENTS == 1


def test_an_operators_number_of_append_statements_wins_in_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONVO_WRITE_STATEMENTS", "4")
    monkeypatch.delenv(WORKER_DATABASE_URL, raising=False)
    prepare_worker_environment("postgresql://u@h/db")
    assert Settings.from_env().write_statements == 4


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("CONVO_LOCK_TIMEOUT_MS", "soon", "valid integer"),
        ("CONVO_POOL_SIZE", "0", "greater than or equal to 1"),
        ("CONVO_POOL_WAIT_S", "-1", "greater than or equal to 0"),
        ("CONVO_DB_WAIT_S", "inf", "finite"),
        ("CONVO_LOG_FORMAT", "xml", "'json' or 'text'"),
        ("CONVO_KEY_CACHE_S", "a minute", "valid number"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable_and_the_problem(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, problem: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{variable} ({value!r}): ")
    assert problem in message


def test_a_bad_database_url_is_named_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "mysql://user:s3cret@db/convo")
    with pytest.raises(SettingsError, match=r"^DATABASE_URL must be a PostgreSQL URL") as refused:
        Settings.from_env()
    assert "s3cret" not in str(refused.value)


def test_the_pool_the_key_cache_cors_and_gzip_are_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_from(
        monkeypatch,
        {
            "CONVO_POOL_SIZE": "25",
            "CONVO_POOL_WAIT_S": "2.5",
            "CONVO_KEY_CACHE_S": "0",
            "CONVO_CORS_ORIGINS": "https://a.example, https://b.example",
            "CONVO_GZIP_MIN_BYTES": "100",
            "CONVO_LOG_LEVEL": "debug",
        },
    )
    assert (settings.pool_size, settings.pool_wait_s, settings.key_cache_s) == (25, 2.5, 0)
    assert settings.cors_origins == ("https://a.example", "https://b.example")
    assert settings.gzip_min_bytes == 100
    assert settings.log_level == "DEBUG"


def test_empty_variables_mean_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from(monkeypatch, {"CONVO_POOL_SIZE": "", "DATABASE_URL": ""})
    assert settings.pool_size == 10
    assert settings.database_url is None


def test_every_setting_is_one_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [variable for variable, _, _ in VARIABLES]
    assert len(names) == len(set(names)) == len(Settings.model_fields)
    assert all(n == "DATABASE_URL" or n.startswith("CONVO_") for n in names)
    assert all(meaning for _, _, meaning in VARIABLES)


async def test_the_pool_settings_reach_the_storages_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    async def connect(url: str, **kwargs: object) -> object:
        seen.update(kwargs)
        return object()

    monkeypatch.setattr(PostgresStorage, "connect", connect)
    settings = Settings(
        database_url=None,
        pool_size=7,
        pool_wait_s=1.5,
        replica_urls=("postgresql://u@r/db",),
        replica_max_lag_ms=300,
    )
    await open_storage("postgresql://u@h/db", settings)
    assert (seen["max_size"], seen["timeout"]) == (7, 1.5)
    assert (seen["replicas"], seen["max_replica_lag_ms"]) == (("postgresql://u@r/db",), 300)


def test_the_summarizer_settings_come_from_the_environment_and_hide_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = settings_from(
        monkeypatch,
        {
            "CONVO_SUMMARIZER_URL": "http://127.0.0.1:11434/v1",
            "CONVO_SUMMARIZER_MODEL": "llama3.1",
            "CONVO_SUMMARIZER_API_KEY": "sk-very-secret",
        },
    )
    assert str(settings.summarizer_url) == "http://127.0.0.1:11434/v1"
    assert settings.summarizer_api_key is not None
    assert settings.summarizer_api_key.get_secret_value() == "sk-very-secret"
    assert "sk-very-secret" not in str(settings.effective())
    monkeypatch.setenv("CONVO_SUMMARIZER_URL", "not a url")
    with pytest.raises(SettingsError, match="CONVO_SUMMARIZER_URL"):
        Settings.from_env()
    monkeypatch.setenv("CONVO_SUMMARIZER_URL", "http://127.0.0.1/v1")
    monkeypatch.setenv("CONVO_SUMMARIZER_TIMEOUT_S", "9999")
    with pytest.raises(SettingsError, match="CONVO_SUMMARIZER_TIMEOUT_S"):
        Settings.from_env()
