"""Every command that opens the database, given a database it cannot use:
one line on stderr naming the problem, exit code 1, no traceback.

Run in-process (CliRunner). The "missing database" case needs the test
server (it answers that the database does not exist); the others need
nothing listening at all.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import make_url
from typer.testing import CliRunner

from convo import app
from hosting.database import connection_problem, is_permanent

SOME_ID = str(uuid.UUID(int=7))
COMMANDS = [
    ["serve", "--port", "1"],
    ["migrate"],
    ["demo"],
    ["rebuild"],
    ["keys", "create", "--tenant", "acme", "--name", "ci"],
    ["keys", "list"],
    ["keys", "revoke", SOME_ID],
    ["assemble", "-f", "openai-chat", "-c", SOME_ID],
]
# Nothing listens on port 1; the password must never be shown.
REFUSED = "postgresql://convo:s3cret@127.0.0.1:1/convo"


def _missing_database(server: str) -> str:
    return make_url(server).set(database="convo_no_such_database").render_as_string(False)


# "missing" asks the test server (tests/conftest.py marks only the tests that
# name a database fixture as integration; this one is asked for at run time).
@pytest.fixture(params=["mysql", "refused", pytest.param("missing", marks=pytest.mark.integration)])
def problem(request: pytest.FixtureRequest) -> tuple[dict[str, str], str]:
    """(the environment, what the line must say)"""
    if request.param == "mysql":
        return {"DATABASE_URL": "mysql://u@h/db"}, "DATABASE_URL must be a PostgreSQL URL"
    if request.param == "refused":
        return {"DATABASE_URL": REFUSED, "CONVO_DB_WAIT_S": "0.3"}, "Connection refused"
    server: str = request.getfixturevalue("database_server")
    return {"DATABASE_URL": _missing_database(server)}, (
        'database "convo_no_such_database" does not exist'
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_database_problem_is_one_line_and_exit_1(
    command: list[str], problem: tuple[dict[str, str], str]
) -> None:
    env, says = problem
    result = CliRunner().invoke(app, command, env=env)
    lines = result.stderr.strip().splitlines()
    name = command[0] if command[0] != "keys" else " ".join(command[:2])
    assert result.exit_code == 1, result.output
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"convo {name}: ")
    assert says in lines[0]
    assert "Traceback" not in result.output
    assert "s3cret" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_waiting_gives_up_after_the_configured_time() -> None:
    result = CliRunner().invoke(
        app, ["migrate"], env={"DATABASE_URL": REFUSED, "CONVO_DB_WAIT_S": "0.5"}
    )
    assert "gave up after 0.5 s; CONVO_DB_WAIT_S sets how long" in result.stderr
    assert "postgresql+psycopg://convo:***@127.0.0.1:1/convo" in result.stderr


@pytest.mark.parametrize(
    ("message", "reason", "permanent"),
    [
        (
            'connection failed: connection to server at "db" (10.0.0.2), port 5432 failed: '
            'FATAL:  password authentication failed for user "convo"',
            'password authentication failed for user "convo"',
            True,
        ),
        (
            'connection failed: connection to server at "db", port 5432 failed: '
            'FATAL:  role "nobody" does not exist',
            'role "nobody" does not exist',
            True,
        ),
        (
            'connection failed: connection to server at "db", port 5432 failed: '
            "FATAL:  the database system is starting up",
            "the database system is starting up",
            False,
        ),
        (
            'connection failed: could not translate host name "db" to address: '
            "Name or service not known",
            "could not translate host name",
            False,
        ),
    ],
)
def test_connection_problems_are_told_apart(message: str, reason: str, permanent: bool) -> None:
    said = connection_problem(Exception(message))
    assert reason in said
    assert is_permanent(said) is permanent
