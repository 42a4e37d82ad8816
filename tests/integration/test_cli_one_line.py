"""Every `convo` command, given a bad flag, a bad database URL or a
conversation that does not exist: one line on stderr naming the problem,
a non-zero exit, no traceback and no internal id.

Run through `convo.main` (what the installed `convo` runs), in-process."""

from __future__ import annotations

import re

import pytest

from convo import main

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# Each command with the least it needs to get as far as the database.
COMMANDS: dict[str, list[str]] = {
    "config": ["config"],
    "serve": ["serve", "--port", "1"],
    "migrate": ["migrate"],
    "demo": ["demo"],
    "rebuild": ["rebuild"],
    "keys create": ["keys", "create", "--tenant", "acme", "--name", "ci"],
    "keys list": ["keys", "list"],
    "keys revoke": ["keys", "revoke", "3f0c9a4e"],
    "assemble": ["assemble", "-f", "openai-chat", "-c", "user-123"],
    "compact": ["compact", "--tenant", "acme", "--max-messages", "5"],
    "export": ["export", "--since", "2026-01-01T00:00:00Z"],
    "tail": ["tail", "--after", "0-0"],
    "conversations": ["conversations"],
    "search": ["search", "hello"],
    "search-index status": ["search-index", "status"],
}
MISSING = {
    "rebuild": ["rebuild", "-c", "nope"],
    "assemble": ["assemble", "-f", "openai-chat", "-c", "nope"],
    "export": ["export", "-c", "nope"],
    "search": ["search", "hello", "-c", "nope"],
}


def _convo(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ended:
        main(args)
    captured = capsys.readouterr()
    code = ended.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert not UUID.search(err), err
    return lines[0]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_bad_flag(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _convo(capsys, [*name.split(), "--no-such-flag"])
    assert code == 2
    line = _one_line(err)
    assert line.startswith(f"convo {name}: No such option: --no-such-flag"), line


@pytest.mark.parametrize("name", [n for n in COMMANDS if n != "config"])
def test_a_bad_database_url(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "mysql://u@h/db")
    code, _, err = _convo(capsys, COMMANDS[name])
    assert code != 0
    line = _one_line(err)
    assert line.startswith(f"convo {name}: "), line
    assert "DATABASE_URL must be a PostgreSQL URL" in line


@pytest.mark.parametrize("name", MISSING)
def test_a_missing_conversation(
    name: str,
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    code, _, err = _convo(capsys, MISSING[name])
    assert code != 0
    line = _one_line(err)
    assert line.startswith(f"convo {name}: "), line
    assert "nope" in line
    assert "does not exist" in line


def test_compacting_a_missing_conversation_says_not_found(
    database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    args = [*COMMANDS["compact"], "--conversation", "nope", "--json"]
    code, out, err = _convo(capsys, args)
    assert code == 3
    assert '"status":"not_found"' in out.replace(" ", "")
    assert "Traceback" not in err
    assert not UUID.search(out + err)


def test_an_unexpected_error_is_one_line_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hosting.settings import Settings

    def broken() -> Settings:
        raise RuntimeError("something\nbroke")

    monkeypatch.setattr(Settings, "from_env", broken)
    monkeypatch.delenv("CONVO_TRACEBACK", raising=False)
    code, _, err = _convo(capsys, ["config"])
    assert code == 1
    line = _one_line(err)
    assert line == (
        "convo config: unexpected error, a bug: RuntimeError: something broke"
        " (CONVO_TRACEBACK=1 shows where)"
    )


def test_serving_a_database_never_migrated_without_migrating_is_refused(
    empty_database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", empty_database_url)
    code, _, err = _convo(capsys, ["serve", "--no-migrate", "--port", "1"])
    assert code == 1
    line = _one_line(err)
    assert line.startswith("convo serve: the database "), line
    assert "has no convo-store schema" in line
    assert "run `convo migrate`" in line
