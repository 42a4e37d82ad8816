"""What a newcomer meets before any code runs: the Makefile's knobs, where a
quick benchmark writes, and the container image (read, not built: no
Docker engine is assumed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _make_dry_run(*args: str) -> str:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in {"PYTHON", "HOST", "PORT"}},
    )
    return done.stdout


@pytest.fixture
def other_python(tmp_path: Path) -> Path:
    """An "interpreter" that says it is a version no .venv runs."""
    fake = tmp_path / "python9"
    fake.write_text("#!/bin/sh\necho 9.99.0\n")
    fake.chmod(0o755)
    return fake


def test_serve_takes_host_and_port() -> None:
    assert "convo serve --host 0.0.0.0 --port 9000" in _make_dry_run(
        "serve", "HOST=0.0.0.0", "PORT=9000"
    )
    assert "convo serve --host 127.0.0.1 --port 8000" in _make_dry_run("serve")


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="no .venv here")
def test_python_names_the_interpreter_and_a_venv_of_another_is_made_again(
    other_python: Path,
) -> None:
    planned = _make_dry_run("install", f"PYTHON={other_python}")
    assert f"PYTHON={other_python} is 9.99.0: making .venv again" in planned
    assert "rm -rf .venv" in planned
    # The same interpreter as the venv's: nothing is made again.
    assert "making .venv again" not in _make_dry_run("install", f"PYTHON={sys.executable}")


def test_a_quick_benchmark_writes_beside_the_published_results() -> None:
    assert "CONVO_BENCH_QUICK=1" in _make_dry_run("bench-quick")
    code = (
        "from bench.report import RESULTS_DIR, PUBLISHED_DIR; from bench import summary;"
        " print(RESULTS_DIR); print(PUBLISHED_DIR); print(summary.DOCS)"
    )
    env = {**os.environ, "CONVO_BENCH_QUICK": "1"}
    env.pop("CONVO_BENCH_RESULTS", None)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    results, published, page = (Path(p) for p in out)
    assert results == published / "quick"
    assert page == results / "benchmarks.md"  # never docs/benchmarks.md
    assert "bench/results/quick/" in (ROOT / ".gitignore").read_text().splitlines()


def _stages(dockerfile: str) -> list[str]:
    return re.split(r"(?m)^FROM ", dockerfile)[1:]


def test_the_image_is_two_stages_on_a_pinned_base() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = _stages(dockerfile)
    assert len(stages) == 2
    for stage in stages:
        base = stage.split()[0]
        # A version, not a moving tag.
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base), base
    runtime = stages[1]
    assert "AS runtime" in runtime.splitlines()[0]
    installs = [line for line in runtime.splitlines() if "pip install" in line]
    assert installs
    assert all('"convo-store[server]"' in line for line in installs)
    for unwanted in ("embedded", "[dev", "gcc", "build-essential", "apt-get"):
        assert unwanted not in runtime, unwanted
    assert "--no-index" in runtime  # only the wheels the build stage made
    assert re.search(r"(?m)^USER 10001", runtime)


def test_the_build_context_is_the_packages_only() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignored[ignored.index("*")] == "*"
    allowed = {line[1:].rstrip("/") for line in ignored if line.startswith("!")}
    assert allowed == {
        "pyproject.toml",
        "constraints.txt",
        "README.md",
        "LICENSE",
        "store",
        "hosting",
        "convo",
        "api",
        "migrations",
    }
