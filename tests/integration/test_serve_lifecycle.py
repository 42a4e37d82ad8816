"""`convo serve` on the embedded PostgreSQL, as an operator runs it: a
process, stopped by a signal. It must stop the embedded server too, and a
server left behind by a killed process must be stopped by the next command.

Slow-ish (each start is a PostgreSQL start and a Python start), so the
data directory is shared by the module's tests (one initdb).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CONVO = [sys.executable, "-c", "from convo import main; main()"]
STARTUP_S = 90.0


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("convo-data")
    yield path
    _stop_leftover(path / "pgdata")


def _environment(data_dir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CONVO_TEST_DATABASE_URL")
    }
    env.update(CONVO_DATA_DIR=str(data_dir), CONVO_LOG_FORMAT="json", CONVO_SHUTDOWN_TIMEOUT_S="5")
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _postmaster_running(pgdata: Path) -> bool:
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().split("\n", 1)[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _handles(pgdata: Path) -> list[int]:
    path = pgdata / ".handle_pids.json"
    return list(json.loads(path.read_text() or "[]")) if path.exists() else []


def _stop_leftover(pgdata: Path) -> None:
    """Tidy up after a failed test: no PostgreSQL may outlive the module."""
    if _postmaster_running(pgdata):
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, signal.SIGTERM)


def _start_serving(data_dir: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    process = subprocess.Popen(
        [*CONVO, "serve", "--port", str(port), *extra],
        env=_environment(data_dir),
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"convo serve exited with {process.returncode}: {process.stderr}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    pytest.fail("convo serve did not answer /health in time")


def _stopped_cleanly(process: subprocess.Popen[str], stop: signal.Signals, pgdata: Path) -> None:
    """Send `stop`; the server must exit 0, its embedded PostgreSQL with it,
    and say what stopped it."""
    try:
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert not _postmaster_running(pgdata)
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert f"stopped by {stop.name}" in [line["message"] for line in lines]


@pytest.mark.parametrize(
    "stop", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_stop_signal_stops_the_server_and_the_embedded_postgres(
    data_dir: Path, stop: signal.Signals
) -> None:
    process, base = _start_serving(data_dir)
    pgdata = data_dir / "pgdata"
    try:
        assert httpx.get(f"{base}/ready", timeout=5).json() == {"status": "ready"}
        assert _postmaster_running(pgdata)
        assert _handles(pgdata) == [process.pid]
    except BaseException:
        process.kill()
        raise
    _stopped_cleanly(process, stop, pgdata)
    assert _handles(pgdata) == []


def test_a_killed_server_is_stopped_by_the_next_command(data_dir: Path) -> None:
    process, _ = _start_serving(data_dir)
    pgdata = data_dir / "pgdata"
    process.kill()  # SIGKILL: nothing of ours runs
    process.communicate(timeout=30)
    assert _postmaster_running(pgdata)
    assert _handles(pgdata) == [process.pid]  # a dead process, still listed

    migrate = subprocess.run(
        [*CONVO, "migrate"], env=_environment(data_dir), capture_output=True, text=True, timeout=120
    )
    assert migrate.returncode == 0, migrate.stderr
    assert not _postmaster_running(pgdata)
    assert _handles(pgdata) == []


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_worker_processes_serve_and_stop_with_the_embedded_postgres(
    data_dir: Path, stop: signal.Signals
) -> None:
    process, base = _start_serving(data_dir, "--workers", "2")
    pgdata = data_dir / "pgdata"
    try:
        for _ in range(6):  # spread over the workers: each has its own pool
            assert httpx.get(f"{base}/ready", timeout=5).json() == {"status": "ready"}
    except BaseException:
        process.kill()
        raise
    _stopped_cleanly(process, stop, pgdata)
