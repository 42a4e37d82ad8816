"""How a command that opens the database fails: one line, no traceback.

    with database_errors("migrate"):
        settings = load_settings()
        with open_database(settings) as database:
            ...

Any problem with the database — a URL that is not PostgreSQL's, a server
that does not answer within CONVO_DB_WAIT_S, a database that does not
exist, a wrong password, a migration the server refuses, the store's own
storage errors — ends the command with `convo <command>: <problem>` on
stderr and exit code 1.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from hosting.settings import Settings

EXIT_DATABASE = 1
EXIT_BAD_INPUT = 2


def fail(command: str, problem: str, code: int = EXIT_DATABASE) -> typer.Exit:
    typer.echo(f"convo {command}: {' '.join(problem.split())}", err=True)
    return typer.Exit(code=code)


def read_input(command: str, source: str) -> str:
    """The text of file `source` (`-`: standard input); a missing file or
    text that is not UTF-8 ends the command (exit 2, one line)."""
    try:
        if source == "-":
            return sys.stdin.read()
        path = Path(source)
        if not path.is_file():
            raise fail(command, f"no such file: {source}", EXIT_BAD_INPUT)
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise fail(
            command, f"the input is not UTF-8 text ({error.reason})", EXIT_BAD_INPUT
        ) from None


def load_settings() -> Settings:
    """The settings from the environment; a bad value is a StartupError."""
    from hosting.database import StartupError

    try:
        return Settings.from_env()
    except ValueError as error:
        raise StartupError(str(error)) from None


def _driver_problem(error: BaseException) -> str:
    """A driver error in a line: its class, SQLSTATE and first line. (At
    start-up nothing is stored yet, so the server's text cannot quote a
    message; it names the object, e.g. a permission denied on a schema.)"""
    from sqlalchemy import exc as sa_exc

    if isinstance(error, sa_exc.DBAPIError) and error.orig is not None:
        error = error.orig
    sqlstate = getattr(error, "sqlstate", None)
    text = str(error).split("\n", 1)[0].strip()
    code = f" [{sqlstate}]" if sqlstate else ""
    return f"the database refused: {type(error).__name__}{code}: {text}"


@contextmanager
def database_errors(command: str) -> Iterator[None]:
    import psycopg
    from sqlalchemy import exc as sa_exc

    from hosting.database import StartupError, connection_problem
    from hosting.migrate import MigrationLockTimeout
    from store.domain.errors import StorageFailure
    from store.postgres.schema_revision import SchemaNotMigrated

    try:
        yield
    except (StartupError, MigrationLockTimeout) as error:
        raise fail(command, str(error)) from None
    except SchemaNotMigrated as error:
        raise fail(command, str(error)) from None
    except StorageFailure as error:
        raise fail(command, f"the database failed: {error}") from None
    except sa_exc.OperationalError as error:
        raise fail(command, f"the database failed: {connection_problem(error)}") from None
    except (psycopg.Error, sa_exc.SQLAlchemyError) as error:
        raise fail(command, _driver_problem(error)) from None
