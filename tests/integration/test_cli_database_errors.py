"""Every command that opens the database, given a database it cannot use:
one line on stderr naming the problem, exit code 1, no traceback.

Run in-process (CliRunner). The "missing database" case needs the test
server (it answers that the database does not exist); the others need
nothing listening at all.
"""

from __future__ import annotations

import contextlib
import uuid

import psycopg
import pytest
from sqlalchemy import make_url
from typer.testing import CliRunner

from convo import app
from hosting.database import connection_problem, is_permanent
from hosting.settings import libpq_url

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


# `migrate`, `serve` and `demo` create a missing database when the role may:
# the missing database is asked for as a role that may not.
NO_CREATEDB = "convo_test_no_createdb"


def _missing_database(server: str) -> str:
    with psycopg.connect(libpq_url(server), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (NO_CREATEDB,)).fetchone():
            pass
        else:
            with contextlib.suppress(psycopg.errors.DuplicateObject):
                conn.execute(f"CREATE ROLE {NO_CREATEDB} LOGIN NOCREATEDB")
    url = make_url(server).set(database="convo_no_such_database", username=NO_CREATEDB)
    return url.render_as_string(False)


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


@pytest.mark.parametrize("command", [["migrate"], ["demo"]], ids=lambda c: c[0])
def test_a_missing_database_is_created_when_the_role_may(
    command: list[str], database_server: str
) -> None:
    name = f"convo_test_created_{uuid.uuid4().hex[:8]}"
    url = make_url(database_server).set(database=name).render_as_string(False)
    try:
        result = CliRunner().invoke(app, command, env={"DATABASE_URL": url})
        assert result.exit_code == 0, result.output
        assert "created the database" in result.stderr
        with psycopg.connect(libpq_url(url)) as conn:
            assert conn.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
    finally:
        with psycopg.connect(libpq_url(database_server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
