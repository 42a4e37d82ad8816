"""Running the app under uvicorn, and stopping it cleanly — in one process,
or in several worker processes.

SIGTERM (docker stop, systemd, Kubernetes), SIGINT (Ctrl-C) and SIGHUP (the
terminal went away) all stop the server the same way: it stops accepting
connections, lets requests in flight finish for up to
`CONVO_SHUTDOWN_TIMEOUT_S` seconds (then cancels them), runs the app's
shutdown (the storage's pool is closed), and `serve` returns normally. A
second signal cuts the wait short.

With `workers` > 1, uvicorn's supervisor starts that many processes on one
listening socket, each building the app from the environment
(`api.app.app_from_environment`: every worker its own storage and pool),
and the same three signals stop them all (SIGHUP too: uvicorn's supervisor
would restart the workers instead). Several processes are how one host
uses more than one core: a single event loop spends an append's Python work
on one (see docs/benchmarks.md, `processes`).

Returning normally matters. uvicorn's own handling re-raises the signal
once it has shut down, and SIGTERM's default action then kills the
process on the spot: the caller's `finally` blocks never run, and the
embedded PostgreSQL `convo serve` started would keep running with a dead
process in its list of users (see `hosting.embedded`).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import uvicorn
from fastapi import FastAPI
from prometheus_client import multiprocess
from uvicorn.supervisors.multiprocess import Multiprocess

from api.logging import logging_config
from api.metrics import MULTIPROCESS_DIR_ENV
from hosting.settings import WRITE_STATEMENTS_ENV, Settings

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_log = logging.getLogger("convo.server")


class Server(uvicorn.Server):
    """uvicorn's server, stopped by SIGTERM, SIGINT or SIGHUP without
    re-raising the signal afterwards."""

    stopped_by: str | None = None

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.should_exit:
            _log.warning("%s again: not waiting for requests in flight", name)
            self.force_exit = True
            return
        _log.info("%s: stopping (requests in flight may take up to the shutdown timeout)", name)
        self.stopped_by = name
        self.should_exit = True


def config(app: FastAPI, settings: Settings, *, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=logging_config(settings),
        access_log=False,  # `convo.access` logs requests, with their ids
        timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout_s),
        server_header=False,
    )


def serve(app: FastAPI, settings: Settings, *, host: str, port: int) -> Server:
    """Serve `app` until a stop signal; the server, to see how it stopped."""
    server = Server(config(app, settings, host=host, port=port))
    server.run()
    return server


# How `serve_workers` tells its worker processes which database to use.
WORKER_DATABASE_URL = "CONVO_WORKER_DATABASE_URL"

# Statements of optimistic appends each worker keeps in flight, unless
# CONVO_WRITE_STATEMENTS says otherwise (store.postgres.group_commit). One
# process needs two to keep both itself and the server busy (building the
# next statement while the server runs the last); among several workers
# the others fill those gaps, and two each only split the same appends
# into more, smaller statements for the server to run. Measured with 32
# writers on 2 cores (bench/processes.py, runs side by side): 2 workers
# went from 0.58-0.70 of raw psycopg's appends/s to 0.70-0.78 with one
# each, 4 workers from 0.50-0.65 to 0.67-0.79; one process alone did
# better with two (0.87-0.98 against 0.72-0.75). docs/storage.md.
WORKER_WRITE_STATEMENTS = 1


# How long the supervisor waits for a worker to answer its health check
# before it kills and replaces it. A new worker answers only once it has
# imported the command line and the app; uvicorn's 5 s were too short for
# that on a busy 2-core machine, and every worker was killed before it
# served (a restart loop).
WORKER_HEALTHCHECK_S = 30


class Supervisor(Multiprocess):
    """uvicorn's worker supervisor, with SIGHUP stopping like SIGTERM, and a
    dead worker's pool gauges taken out of the metrics' sums."""

    stopped_by: str | None = None

    def handle_int(self) -> None:
        self.stopped_by = "SIGINT"
        super().handle_int()

    def handle_term(self) -> None:
        self.stopped_by = "SIGTERM"
        super().handle_term()

    def handle_hup(self) -> None:
        _log.info("SIGHUP: stopping the workers")
        self.stopped_by = "SIGHUP"
        self.should_exit.set()

    def keep_subprocess_alive(self) -> None:
        dead = [p.pid for p in self.processes if p.pid is not None and not p.process.is_alive()]
        super().keep_subprocess_alive()
        for pid in dead:
            multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def prepare_worker_environment(database_url: str) -> None:
    """What the worker processes inherit: the database the parent opened
    and migrated, and one append statement in flight each unless the
    operator set CONVO_WRITE_STATEMENTS."""
    os.environ[WORKER_DATABASE_URL] = database_url
    os.environ.setdefault(WRITE_STATEMENTS_ENV, str(WORKER_WRITE_STATEMENTS))


@contextmanager
def shared_metrics() -> Iterator[Path]:
    """A directory the workers keep their metrics in, so that a scrape sums
    them all (`api.metrics`): the operator's `PROMETHEUS_MULTIPROC_DIR`,
    emptied of an earlier run's files, or a new one removed at the end."""
    given = os.environ.get(MULTIPROCESS_DIR_ENV)
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        yield directory
        return
    directory = Path(tempfile.mkdtemp(prefix="convo-metrics-"))
    os.environ[MULTIPROCESS_DIR_ENV] = str(directory)
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROCESS_DIR_ENV, None)
        shutil.rmtree(directory, ignore_errors=True)


def serve_workers(
    settings: Settings, *, database_url: str, host: str, port: int, workers: int
) -> Supervisor:
    """Serve with `workers` processes until a stop signal."""
    prepare_worker_environment(database_url)
    worker_config = uvicorn.Config(
        "api.app:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_config=logging_config(settings),
        access_log=False,
        timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout_s),
        server_header=False,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
    )
    sock = worker_config.bind_socket()
    # uvicorn's shared socket reports protocol 0, so asyncio never sets
    # TCP_NODELAY on the connections it accepts, and every keep-alive answer
    # waits for the client's delayed ACK (~40 ms; uvicorn issue #3149).
    # Linux copies the listening socket's option to accepted connections.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    supervisor = Supervisor(worker_config, sockets=[sock])
    with shared_metrics():
        supervisor.run()
    return supervisor
