"""Running one Markdown file's blocks, in order, against a database of its own.

Each file gets a fresh, empty database on the test server (a newcomer's
first hour: the docs must say how its schema gets there), and:

- Python blocks run in one namespace per file, top-level `await` allowed,
  on one event loop kept for the file; `DATABASE_URL` names the file's
  database while they run. A storage a block leaves open is closed when
  that loop shuts down, as `asyncio.run` would.
- Shell blocks run in bash (`set -eo pipefail`) with the venv's `convo` on
  PATH and `DATABASE_URL` set; the variables a block sets are there for the
  file's next blocks. A console transcript (lines starting with `$ `) runs
  its commands only. `curl` fails on an HTTP error status
  (`--fail-with-body`), so a call the docs show going wrong would fail the
  block.
- Blocks that call the API (curl, or an `http` block) get a `convo serve`
  started for the file on a free port, with `API` (its address) and `KEY`
  (a key of tenant `acme`) set. The docs' address, 127.0.0.1:8000, is
  replaced by the server's.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import types
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import make_url

from hosting.settings import libpq_url
from tests.docs.blocks import Block, runnable

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
DOCS_ADDRESS = re.compile(r"(127\.0\.0\.1|localhost):8000\b")
BLOCK_TIMEOUT_S = 180
SERVER_START_S = 60

# Saves the variables a block set (not those bash itself or the
# environment had) for the file's next blocks.
_PROLOGUE = """\
__doc_pristine=" $(compgen -v | tr '\\n' ' ') "
if [ -f "$DOC_RUNNER_STATE" ]; then source "$DOC_RUNNER_STATE"; fi
__doc_save() {
  for __doc_v in $(compgen -v); do
    case "$__doc_pristine" in *" $__doc_v "*) continue ;; esac
    case "$__doc_v" in __doc_*|BASH_*|FUNCNAME|PIPESTATUS) continue ;; esac
    declare -p "$__doc_v" 2>/dev/null
  done > "$DOC_RUNNER_STATE"
}
trap __doc_save EXIT
set -eo pipefail
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _commands_of_transcript(code: str) -> str:
    """A console transcript's commands (`$ ` lines and their continuations)."""
    lines = code.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        return code
    commands: list[str] = []
    continued = False
    for line in lines:
        if line.startswith("$ ") or continued:
            commands.append(line.removeprefix("$ "))
            continued = line.endswith("\\")
    return "\n".join(commands) + "\n"


class DocRun:
    """One file's run: its database, namespace, shell state and server."""

    def __init__(self, path: Path, server_url: str, workdir: Path) -> None:
        self.path = path
        self.blocks = runnable(path)
        self.done = 0
        self.failed: str | None = None
        self._server_url = server_url
        self._workdir = workdir
        stem = re.sub(r"[^a-z0-9]", "_", path.stem.lower())
        self._name = f"convo_doc_{stem}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self._name}"')
        self.database_url = libpq_url(
            make_url(server_url).set(database=self._name).render_as_string(hide_password=False)
        )
        self._module = types.ModuleType(f"doc_runner_{path.stem.replace('-', '_')}")
        self._module.__dict__["__file__"] = str(path)
        self._loop = asyncio.new_event_loop()
        self._state = workdir / "shell-state.sh"
        self._shims = workdir / "bin"
        self._shims.mkdir(parents=True, exist_ok=True)
        # Blocks run in this scratch folder, where a reader's checkout has its
        # virtualenv: `.venv/bin/convo` as the README writes it.
        venv = workdir / ".venv"
        if not venv.exists():
            venv.symlink_to(ROOT / ".venv")
        real_curl = shutil.which("curl") or "/usr/bin/curl"
        shim = self._shims / "curl"
        shim.write_text(f'#!/bin/sh\nexec {real_curl} --fail-with-body "$@"\n')
        shim.chmod(0o755)
        self._server: subprocess.Popen[bytes] | None = None
        self._server_log = workdir / "serve.log"
        self.env = {
            **os.environ,
            "PATH": f"{self._shims}:{VENV_BIN}:{os.environ.get('PATH', '')}",
            "DATABASE_URL": self.database_url,
            "CONVO_DATA_DIR": str(workdir / "data"),
            "CONVO_DB_WAIT_S": "10",
            "DOC_RUNNER_STATE": str(self._state),
        }
        self._port: int | None = None

    # -- running ----------------------------------------------------------

    def run_through(self, index: int) -> None:
        """Run the blocks up to `index` not run yet, then block `index`;
        skip (with the reason) a block marked so."""
        while self.done <= index:
            block = self.blocks[self.done]
            self.done += 1
            if self.failed is not None:
                pytest.skip(f"an earlier block failed: {self.failed}")
            reason = block.skip_reason()
            if reason is not None:
                if self.done - 1 == index:
                    pytest.skip(f"doc-runner: skip — {reason}")
                continue
            try:
                self._run(block)
            except BaseException:
                self.failed = block.name
                raise

    def _run(self, block: Block) -> None:
        if block.calls_the_api:
            self._start_server()
        if block.kind == "python":
            self._run_python(block)
        elif block.kind == "sh":
            self._run_shell(block)
        else:
            self._run_http(block)

    def _run_python(self, block: Block) -> None:
        # Line numbers in a traceback are the Markdown file's.
        source = "\n" * block.line + block.code
        code = compile(source, str(block.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        saved = {name: os.environ.get(name) for name in ("DATABASE_URL", "CONVO_DATA_DIR")}
        os.environ["DATABASE_URL"] = self.env["DATABASE_URL"]
        os.environ["CONVO_DATA_DIR"] = self.env["CONVO_DATA_DIR"]
        sys.modules[self._module.__name__] = self._module
        try:
            if code.co_flags & inspect.CO_COROUTINE:
                self._loop.run_until_complete(eval(code, self._module.__dict__))
            else:
                exec(code, self._module.__dict__)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def _run_shell(self, block: Block) -> None:
        code = _commands_of_transcript(block.code)
        if self._port is not None:
            code = DOCS_ADDRESS.sub(f"127.0.0.1:{self._port}", code)
        done = subprocess.run(
            ["bash", "-c", _PROLOGUE + code],
            # The file's own scratch folder: what a block writes (an export,
            # a dump) never lands in the checkout.
            cwd=self._workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"{block.name} exited {done.returncode}\n"
                f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
                + self._server_tail()
            )

    def _run_http(self, block: Block) -> None:
        """`METHOD /path`, header lines, a blank line, the body."""
        head, _, body = block.code.partition("\n\n")
        request, *header_lines = head.strip().splitlines()
        method, target = request.split()[:2]
        headers = dict(line.split(":", 1) for line in header_lines)
        headers = {k.strip(): v.strip() for k, v in headers.items()}
        headers.setdefault("Authorization", f"Bearer {self.env['KEY']}")
        response = httpx.request(
            method,
            DOCS_ADDRESS.sub(f"127.0.0.1:{self._port}", self.env["API"] + target)
            if target.startswith("/")
            else DOCS_ADDRESS.sub(f"127.0.0.1:{self._port}", target),
            headers=headers,
            content=body.strip().encode() or None,
            timeout=30,
        )
        assert response.status_code < 400, f"{block.name}: {response.status_code} {response.text}"

    # -- the file's server ------------------------------------------------

    def _start_server(self) -> None:
        if self._server is not None:
            return
        created = subprocess.run(
            ["convo", "keys", "create", "--tenant", "acme", "--name", "doc-runner"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
        assert created.returncode == 0, created.stderr
        self._port = _free_port()
        self.env["KEY"] = created.stdout.strip()
        self.env["API"] = f"http://127.0.0.1:{self._port}"
        with self._server_log.open("wb") as log:
            self._server = subprocess.Popen(
                ["convo", "serve", "--host", "127.0.0.1", "--port", str(self._port)],
                env={**self.env, "CONVO_LOG_FORMAT": "text"},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self._server.poll() is not None:
                raise AssertionError(f"convo serve ended at start{self._server_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.env['API']}/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise AssertionError(
            f"convo serve did not answer in {SERVER_START_S} s{self._server_tail()}"
        )

    def _server_tail(self) -> str:
        if self._server is None or not self._server_log.exists():
            return ""
        return f"\n--- convo serve ---\n{self._server_log.read_text(errors='replace')[-2000:]}"

    # -- the end ----------------------------------------------------------

    def close(self) -> None:
        try:
            self._shut_loop()
        finally:
            sys.modules.pop(self._module.__name__, None)
            self._stop_server()
            with psycopg.connect(libpq_url(self._server_url), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self._name}" WITH (FORCE)')

    def _shut_loop(self) -> None:
        """What `asyncio.run` does at its end: cancel what still runs (a
        storage a block left open closes then), then close the loop."""
        loop = self._loop
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(
                    asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 30)
                )
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def _stop_server(self) -> None:
        if self._server is None:
            return
        self._server.terminate()
        try:
            self._server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait()


class DocRuns:
    """Every file's run in this session, opened at its first block and
    closed after its last."""

    def __init__(self, server_url: str, workdir: Path) -> None:
        self._server_url = server_url
        self._workdir = workdir
        self._runs: dict[Path, DocRun] = {}

    def run(self, path: Path, index: int) -> None:
        run = self._runs.get(path)
        if run is None:
            run = self._runs[path] = DocRun(path, self._server_url, self._workdir / path.stem)
        try:
            run.run_through(index)
        finally:
            if run.done >= len(run.blocks):
                self._runs.pop(path)
                run.close()

    def close(self) -> None:
        while self._runs:
            _, run = self._runs.popitem()
            run.close()
