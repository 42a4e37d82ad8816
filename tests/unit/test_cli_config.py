"""`convo --version` and `convo config`: what an operator asks first."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from convo import app
from hosting.settings import VARIABLES, Settings

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("convo-store ")


def config_shown(monkeypatch: pytest.MonkeyPatch, environment: dict[str, str]) -> str:
    """What `convo config` prints, wide enough for every row, with `environment` set."""
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    result = runner.invoke(app, ["config"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_config_lists_every_setting_and_hides_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = config_shown(
        monkeypatch,
        {
            "DATABASE_URL": "postgresql://convo:s3cret@db.example/convo",
            "CONVO_LOCK_TIMEOUT_MS": "1234",
        },
    )
    for variable, _, _ in VARIABLES:
        assert variable in shown
    assert "1234" in shown
    assert "s3cret" not in shown


def test_every_setting_is_listed() -> None:
    fields = set(Settings.model_fields)
    assert {field for _, field, _ in VARIABLES} == fields


def test_config_names_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVO_LOCK_TIMEOUT_MS", "soon")
    result = runner.invoke(app, ["config"])
    assert result.exit_code == 1
    assert "CONVO_LOCK_TIMEOUT_MS" in result.output


def test_config_prints_the_effective_values_of_the_new_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shown = config_shown(
        monkeypatch, {"CONVO_POOL_SIZE": "25", "CONVO_CORS_ORIGINS": "https://a.example"}
    )
    row = next(line for line in shown.splitlines() if "CONVO_POOL_SIZE" in line)
    assert "25" in row
    assert "https://a.example" in shown
