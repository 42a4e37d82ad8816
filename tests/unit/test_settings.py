"""DATABASE_URL spellings, the timeouts every connection sets, and the append
statements each process keeps in flight."""

from __future__ import annotations

import os

import pytest

from api.server import WORKER_DATABASE_URL, WORKER_WRITE_STATEMENTS, prepare_worker_environment
from hosting.settings import Settings, libpq_url, sqlalchemy_url
from store.postgres.group_commit import WRITERS


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
    monkeypatch.setenv("DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("CONVO_STATEMENT_TIMEOUT_MS", "1234")
    settings = Settings.from_env()
    assert settings.database_url == "postgresql+psycopg://u@h/db"
    options = settings.connection_options()
    assert "-c statement_timeout=1234" in options
    assert "-c lock_timeout=5000" in options
    assert "-c idle_in_transaction_session_timeout=60000" in options


def test_a_bad_timeout_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVO_LOCK_TIMEOUT_MS", "soon")
    with pytest.raises(ValueError, match="CONVO_LOCK_TIMEOUT_MS"):
        Settings.from_env()


def test_append_statements_in_flight_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CONVO_WRITE_STATEMENTS", raising=False)
    assert Settings.from_env().write_statements == WRITERS
    monkeypatch.setenv("CONVO_WRITE_STATEMENTS", "3")
    assert Settings.from_env().write_statements == 3


@pytest.mark.parametrize("bad", ["0", "17", "two"])
def test_a_bad_number_of_append_statements_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("CONVO_WRITE_STATEMENTS", bad)
    with pytest.raises(ValueError, match="CONVO_WRITE_STATEMENTS"):
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
