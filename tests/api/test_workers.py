"""`convo serve --workers 2`, for real (a subprocess on a fresh database):
one scrape of `/metrics` covers both workers, whichever answers it, and a
key revoked while both remember it is refused from its next request on, by
either worker.

Each request opens its own connection, so the kernel hands requests to both
workers; the workers' metric files (one set per process, in the directory
the test gives `PROMETHEUS_MULTIPROC_DIR`) show that both served.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from hosting.keys import create_key, revoke_key
from tests.api.test_metrics import samples

pytestmark = pytest.mark.slow

WORKERS = 2
START_S = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The server's base URL and its workers' metrics directory."""
    port = _free_port()
    metrics_dir = tmp_path / "metrics"
    env = {**os.environ, "DATABASE_URL": database_url, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    log = (tmp_path / "serve.log").open("w")
    command = [sys.executable, "-c", "from convo import main; main()", "serve"]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--workers", str(WORKERS), "--no-migrate"],
        env=env,
        stdout=log,
        stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while len(_worker_pids(metrics_dir)) < WORKERS or not _ready(base):
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.2)
        yield base, metrics_dir
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/ready", timeout=2, trust_env=False).status_code == 200
    except httpx.TransportError:
        return False


def _worker_pids(metrics_dir: Path) -> set[int]:
    """The processes that have counted something (one file set each)."""
    return {
        int(match[1])
        for path in metrics_dir.glob("*.db")
        if (match := re.search(r"_(\d+)\.db$", path.name))
    }


def _fresh_get(url: str, **kwargs: object) -> httpx.Response:
    """A request on a connection of its own (any worker may accept it)."""
    with httpx.Client(trust_env=False, timeout=10) as client:
        return client.get(url, **kwargs)  # type: ignore[arg-type]


def test_one_scrape_covers_every_worker(served: tuple[str, Path]) -> None:
    base, metrics_dir = served
    before = samples(_fresh_get(f"{base}/metrics").text)
    health = 'convo_http_requests_total{method="GET",route="/health",status="200"}'
    assert before.get(health, 0) == 0
    for _ in range(40):
        assert _fresh_get(f"{base}/health").status_code == 200
    # Each worker's own counts are in its own files: both served requests.
    assert len(_worker_pids(metrics_dir)) == WORKERS
    for _ in range(6):  # whichever worker answers, the same total
        assert samples(_fresh_get(f"{base}/metrics").text)[health] == 40
    scraped = samples(_fresh_get(f"{base}/metrics").text)
    assert scraped["convo_pool_max"] >= WORKERS  # the pools of both workers
    assert scraped["convo_feed_lag_seconds"] >= 0


async def test_a_revoked_key_is_refused_by_every_worker_at_once(
    served: tuple[str, Path], engine: AsyncEngine
) -> None:
    base, _ = served
    key_id, key = await create_key(engine, "acme", "revoked in the test")
    headers = {"Authorization": f"Bearer {key}"}
    # Both workers remember the key (requests on fresh connections reach both).
    for _ in range(20):
        response = _fresh_get(f"{base}/conversations", headers=headers)
        assert response.status_code == 200, response.text
    assert await revoke_key(engine, key_id)
    for _ in range(20):
        response = _fresh_get(f"{base}/conversations", headers=headers)
        assert response.status_code == 401, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"] == "Unauthorized"
