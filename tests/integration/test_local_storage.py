"""`hosting.local.local_storage()`: one call from Python to a migrated,
connected storage, on DATABASE_URL or the embedded server."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import make_url

from hosting.local import local_storage
from hosting.settings import libpq_url
from store import Message, Repository


async def _one_turn(repository: Repository) -> None:
    cid = (await repository.create_conversation("user-123")).id
    await repository.append_messages(cid, [Message(role="user", content="hi")])
    assert [m.text for m in await repository.read_messages(cid)] == ["hi"]


async def test_on_a_missing_database_it_is_created_and_migrated(
    database_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"convo_test_local_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(
        "DATABASE_URL", make_url(database_server).set(database=name).render_as_string(False)
    )
    try:
        async with local_storage() as storage:
            await _one_turn(Repository(storage, tenant="acme"))
        assert storage.pool.closed
    finally:
        with psycopg.connect(libpq_url(database_server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.slow
async def test_without_database_url_it_starts_and_stops_the_embedded_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("CONVO_DATA_DIR", str(tmp_path))
    async with local_storage() as storage:
        await _one_turn(Repository(storage, tenant="acme"))
        assert (tmp_path / "pgdata" / "postmaster.pid").exists()
    # The last user of the server stopped it.
    assert not (tmp_path / "pgdata" / "postmaster.pid").exists()
