"""Backup and restore (docs/operations.md, "Backup and restore"), as the
procedure says, under load: a logical dump (`pg_dump -Fc`) taken while
writers append, restored with `pg_restore` into a fresh database; `convo
verify` passes on it, every append acknowledged before the dump began is
in it exactly once, and nothing is in it that no writer sent."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import make_url
from typer.testing import CliRunner

from convo import app
from hosting.settings import libpq_url
from store.domain.errors import StorageFailure
from store.domain.messages import Message
from store.postgres import PostgresStorage
from store.repository import Repository

pytestmark = pytest.mark.integration

WRITERS = 4


def _major(tool: str) -> int:
    """The major version of a PostgreSQL client tool (`pg_dump (PostgreSQL) 15.20 …`)."""
    done = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[2].split(".")[0])


def client_tool(name: str, database_url: str) -> str:
    """`name` (pg_dump, pg_restore) as new as the server: pg_dump refuses a
    newer server. The server's own (beside its binaries), else the one on
    the PATH, whichever is new enough; skipped when none is."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        server = conn.info.server_version // 10000
        found = conn.execute("SELECT setting FROM pg_config WHERE name = 'BINDIR'").fetchone()
    # The server's own folder first: its tools are its version.
    candidates = [str(Path(str(found[0])) / name) if found else None, shutil.which(name)]
    for tool in candidates:
        if tool and Path(tool).exists() and _major(tool) >= server:
            return tool
    pytest.skip(f"needs {name} of PostgreSQL {server} or newer (its client tools)")


def _server(database_url: str) -> str:
    url = make_url(database_url).set(database="postgres")
    return libpq_url(url.render_as_string(hide_password=False))


async def run(*command: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0, f"{command[0]}: {err.decode()} {out.decode()}"


async def under_load(
    database_url: str, backup: Callable[[], Awaitable[None]]
) -> tuple[dict[str, float], set[str]]:
    """(client message ids acknowledged before `backup` began → when, every
    id sent), with `backup` run while writers append; returns once it is done."""
    storage = await PostgresStorage.connect(database_url)
    repository = Repository(storage, tenant="acme")
    acked: dict[str, float] = {}
    sent: set[str] = set()
    stop = asyncio.Event()
    for n in range(WRITERS):
        await repository.create_conversation(f"c{n}")

    async def writer(n: int) -> None:
        turn = 0
        while not stop.is_set():
            cid = f"w{n}-{turn}"
            sent.add(cid)
            try:
                await repository.append_messages(
                    f"c{n}", [Message(role="user", content=f"turn {turn}", client_message_id=cid)]
                )
            except StorageFailure:
                await asyncio.sleep(0.05)  # busy or unavailable: a client retries later
            else:
                acked[cid] = time.monotonic()
            turn += 1

    writers = [asyncio.create_task(writer(n)) for n in range(WRITERS)]
    try:
        await asyncio.sleep(0.5)
        began = time.monotonic()
        await backup()
        await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.gather(*writers)
        await storage.close()
    before = {cid: at for cid, at in acked.items() if at < began}
    assert len(before) > 10, "too few appends before the dump to show anything"
    assert len(acked) > len(before), "no append ran while the dump did"
    return before, sent


def test_a_dump_taken_under_load_restores_verified_with_every_acknowledged_append(
    database_url: str, tmp_path: Path
) -> None:
    dump = tmp_path / "convo.dump"
    pg_dump, pg_restore = (client_tool(t, database_url) for t in ("pg_dump", "pg_restore"))
    before, sent = asyncio.run(
        under_load(
            database_url,
            lambda: run(pg_dump, "--format=custom", f"--file={dump}", libpq_url(database_url)),
        )
    )

    restored_name = f"convo_restored_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_server(database_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{restored_name}"')
    restored = (
        make_url(database_url).set(database=restored_name).render_as_string(hide_password=False)
    )
    try:
        asyncio.run(
            run(pg_restore, "--no-owner", "--exit-on-error", "-d", libpq_url(restored), str(dump))
        )
        check_restored(restored, before, sent)
    finally:
        with psycopg.connect(_server(database_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{restored_name}" WITH (FORCE)')


def check_restored(url: str, before: dict[str, float], sent: set[str]) -> None:
    """`convo verify` passes on the restored store, which holds every append
    acknowledged before the backup began once, and nothing no writer sent."""
    result = CliRunner().invoke(app, ["verify"], env={"DATABASE_URL": url})
    assert result.exit_code == 0, result.stdout + result.stderr
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            "SELECT client_message_id, count(*) FROM messages GROUP BY 1"
        ).fetchall()
    stored: dict[str, int] = dict(rows)
    missing = [cid for cid in before if stored.get(cid) != 1]
    assert not missing, f"acknowledged before the backup, not restored once: {missing[:5]}"
    assert set(stored) <= sent, "the restore holds messages no writer sent"
