"""Where the database is, for commands that need one, and waiting for it.

With `DATABASE_URL` set, that server is used as it is, once it accepts a
connection: `open_database` waits for it up to `CONVO_DB_WAIT_S` seconds
(default 30), backing off between tries, because in a deployment the
database often starts at the same time as we do. A problem waiting cannot
fix — the database does not exist, the password is wrong, the role is
unknown — is reported at once. Either way the caller gets a
`StartupError` whose message is one line for people (the password hidden).

Without `DATABASE_URL`, the embedded server is started (data in
`<data dir>/pgdata`), a `convo` database is created in it on first use,
and the server is stopped when the command exits — also when it is ended
by SIGTERM or SIGHUP, which here end the command like Ctrl-C does (the
`with` block unwinds), instead of killing the process on the spot.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

import psycopg
import psycopg.sql
from sqlalchemy import make_url

from hosting.engines import create_database_if_missing
from hosting.settings import Settings, libpq_url

EMBEDDED_DATABASE = "convo"

_log = logging.getLogger("convo.startup")

# Connection failures that waiting cannot fix: fail at once.
_PERMANENT = (
    "does not exist",  # database "x" / role "x" does not exist
    "authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "invalid connection option",
    "invalid integer value",
    "invalid sslmode value",
    "permission denied",
)
_FIRST_PAUSE_S = 0.25
_MAX_PAUSE_S = 2.0


class StartupError(Exception):
    """The command cannot start: the message is one line, for people."""


class DatabaseMissing(StartupError):
    """The server answers, but the database named in the URL does not exist."""


@dataclass(frozen=True)
class Database:
    url: str  # SQLAlchemy URL (postgresql+psycopg://…)
    embedded: bool
    where: str  # for people: the server, or the embedded data directory
    created: bool = False  # `open_database(create=True)` made it just now


def shown_url(url: str) -> str:
    """`url` for a message: the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(an unreadable URL)"


def connection_problem(error: BaseException) -> str:
    """The reason a connection attempt failed, on one line: the server's
    FATAL message, or libpq's reason ("Connection refused")."""
    text = str(error)
    if "FATAL:" in text:
        text = text.rsplit("FATAL:", 1)[1]
    elif "failed:" in text:
        text = text.rsplit("failed:", 1)[1]
    line = " ".join(text.split("\n", 1)[0].split())
    return line or type(error).__name__


def is_permanent(problem: str) -> bool:
    return any(marker in problem for marker in _PERMANENT)


def wait_for_database(url: str, wait_s: float) -> None:
    """Return once the database at `url` accepts a connection; raise
    StartupError at once for a problem waiting cannot fix, or after
    `wait_s` seconds of trying."""
    deadline = time.monotonic() + wait_s
    pause = _FIRST_PAUSE_S
    conninfo = libpq_url(url)
    while True:
        remaining = deadline - time.monotonic()
        try:
            timeout = max(1, min(5, int(remaining)))
            psycopg.connect(conninfo, connect_timeout=timeout, autocommit=True).close()
            return
        except psycopg.Error as error:
            problem = connection_problem(error)
        where = f"cannot connect to the database at {shown_url(url)}"
        if problem.startswith("database ") and problem.endswith("does not exist"):
            raise DatabaseMissing(f"{where}: {problem}")
        if is_permanent(problem):
            raise StartupError(f"{where}: {problem}")
        if time.monotonic() + pause > deadline:
            raise StartupError(
                f"{where}: {problem} (gave up after {wait_s:g} s; CONVO_DB_WAIT_S sets how long)"
            )
        _log.debug("database not reachable yet (%s); trying again in %.2f s", problem, pause)
        time.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_S)


def _end_command(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def ending_on_termination() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP end the command by unwinding
    (SystemExit, exit code 128 + the signal), so `finally` blocks run."""
    signals = (signal.SIGTERM, signal.SIGHUP)
    try:
        previous = {sig: signal.signal(sig, _end_command) for sig in signals}
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# Where CREATE DATABASE is sent from: the maintenance databases every
# server has, the first that lets us in.
_MAINTENANCE_DATABASES = ("postgres", "template1")


def create_database(url: str) -> bool:
    """CREATE DATABASE for the database `url` names, from a maintenance
    database of its server, as the URL's role; StartupError (one line)
    when the role may not. Whether it was created (False: it exists)."""
    target = make_url(url)
    name = target.database or ""
    refused: str | None = None
    for maintenance in _MAINTENANCE_DATABASES:
        server = target.set(database=maintenance).render_as_string(hide_password=False)
        try:
            with psycopg.connect(libpq_url(server), autocommit=True, connect_timeout=10) as conn:
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
                ).fetchone()
                if exists is not None:
                    return False
                conn.execute(
                    psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name))
                )
                return True
        except psycopg.errors.InsufficientPrivilege:
            role = target.username or "(the default role)"
            raise StartupError(
                f'the database "{name}" does not exist and the role {role} may not create it'
                f" (no CREATEDB): create it (createdb {name}), or use a role that may"
            ) from None
        except psycopg.Error as error:
            refused = connection_problem(error)
    raise StartupError(
        f'the database "{name}" does not exist, and no maintenance database of its server'
        f" let us in to create it: {refused}"
    )


@contextmanager
def open_database(settings: Settings, *, create: bool = False) -> Iterator[Database]:
    """The database the settings name, waited for; with `create`, one that
    does not exist on its server is created first (when the role may)."""
    if settings.database_url:
        created = False
        try:
            wait_for_database(settings.database_url, settings.db_wait_s)
        except DatabaseMissing:
            if not create:
                raise
            created = create_database(settings.database_url)
            wait_for_database(settings.database_url, settings.db_wait_s)
        yield Database(
            url=settings.database_url,
            embedded=False,
            where=shown_url(settings.database_url),
            created=created,
        )
        return
    from hosting.embedded import start_embedded

    with ending_on_termination():
        try:
            server = start_embedded(settings.data_dir)
        except Exception as error:
            problem = " ".join(str(error).split("\n", 1)[0].split()) or type(error).__name__
            raise StartupError(
                f"cannot start the embedded PostgreSQL in {settings.data_dir / 'pgdata'}: "
                f"{type(error).__name__}: {problem}"
            ) from None
        try:
            create_database_if_missing(server.url, EMBEDDED_DATABASE)
            url = make_url(server.url).set(database=EMBEDDED_DATABASE)
            yield Database(
                url=url.render_as_string(hide_password=False),
                embedded=True,
                where=str(server.pgdata),
            )
        finally:
            server.stop()
