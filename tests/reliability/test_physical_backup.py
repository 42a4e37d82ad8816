"""Physical backup and restore (docs/operations.md, "Backup and restore"):
a PostgreSQL server of the test's own (initdb in a temporary directory)
holds a store; a base backup with its WAL (`pg_basebackup -X stream`) is
taken while writers append; the primary is stopped, the copy started as a
server of its own; `convo verify` passes on it, and every append
acknowledged before the backup began is there once, nothing else.

Needs PostgreSQL's server binaries (`pg_config --bindir`); run as root,
the servers run as the `postgres` user (PostgreSQL refuses root)."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from hosting import migrate
from hosting.engines import make_sync_engine
from hosting.settings import Settings
from tests.reliability.test_backup import check_restored, run, under_load

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _bindir() -> Path | None:
    try:
        found = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(found)
    needed = ("initdb", "pg_ctl", "pg_basebackup")
    return path if all((path / tool).exists() for tool in needed) else None


def _as_server_user() -> list[str] | None:
    """The prefix that runs a server tool: none, or `runuser` to `postgres` as root."""
    if os.getuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return None
    return ["runuser", "-u", "postgres", "--"] if shutil.which("runuser") else None


BIN = _bindir()
AS_SERVER = _as_server_user()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Server:
    """A PostgreSQL server on a data directory of ours, on a loopback port."""

    def __init__(self, data: Path, sockets: Path) -> None:
        self.data, self.sockets, self.port = data, sockets, _free_port()

    def tool(self, name: str, *args: str) -> list[str]:
        assert BIN is not None
        assert AS_SERVER is not None
        return [*AS_SERVER, str(BIN / name), *args]

    def start(self) -> None:
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1"
        subprocess.run(
            self.tool("pg_ctl", "-D", str(self.data), "-o", options, "-w", "-t", "60",
                      "-l", f"{self.data}.log", "start"),
            check=True, capture_output=True,
        )  # fmt: skip

    def stop(self) -> None:
        subprocess.run(
            self.tool("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"),
            capture_output=True,
        )

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


@pytest.fixture
def scratch() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="convo-physical-"))
    if AS_SERVER:
        shutil.chown(root, "postgres", "postgres")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(
    BIN is None or AS_SERVER is None,
    reason="needs PostgreSQL's server binaries, and a postgres user to run them as root",
)
def test_a_base_backup_with_wal_taken_under_load_restores_verified(
    scratch: Path, settings: Settings
) -> None:
    primary = Server(scratch / "primary", scratch)
    subprocess.run(
        primary.tool("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust",
                     "-E", "UTF8", "--locale=C"),
        check=True, capture_output=True,
    )  # fmt: skip
    primary.start()
    copy = Server(scratch / "copy", scratch)
    try:
        with psycopg.connect(primary.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE convo")
        engine = make_sync_engine(primary.url("convo"), settings)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()

        async def base_backup() -> None:
            await run(
                *primary.tool(
                    "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port),
                    "-U", "postgres", "-D", str(copy.data), "-X", "stream", "-c", "fast",
                )
            )  # fmt: skip

        before, sent = asyncio.run(under_load(primary.url("convo"), base_backup))
        primary.stop()
        copy.start()
        check_restored(copy.url("convo"), before, sent)
    finally:
        copy.stop()
        primary.stop()
