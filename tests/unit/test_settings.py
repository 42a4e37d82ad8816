"""DATABASE_URL spellings and the timeouts every connection sets."""

from __future__ import annotations

import pytest

from store.settings import Settings, libpq_url, sqlalchemy_url


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
