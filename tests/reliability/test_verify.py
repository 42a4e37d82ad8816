"""`convo verify` (store.postgres.verify): a store written by the ordinary
operations verifies clean; a copy of it, corrupted one way per check, is
reported one line per problem, by conversation and check, with exit 1 —
and verifying changes nothing."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from sqlalchemy import make_url
from typer.testing import CliRunner

from convo import app
from hosting.settings import libpq_url
from store.domain.messages import Message, ToolCall
from store.postgres import PostgresStorage
from store.postgres.verify import Verified, verify_store
from store.repository import Repository

pytestmark = pytest.mark.integration


async def _seed(database_url: str) -> None:
    storage = await PostgresStorage.connect(database_url)
    try:
        repository = Repository(storage, tenant="acme")
        await repository.create_conversation("clean")
        await repository.append_messages(
            "clean",
            [
                Message(role="system", content="You are terse."),
                Message(role="user", content="list the lighthouse files"),
                Message(
                    role="assistant",
                    content="",
                    tool_calls=[ToolCall(id="call_1", name="ls", arguments={"path": "."})],
                ),
                Message(role="tool", tool_call_id="call_1", content="a.txt b.txt"),
                Message(role="assistant", content="a.txt and b.txt"),
            ],
        )
        await repository.replace("clean", 2, "list the harbour files")
        await repository.pin_message("clean", 2)
        await repository.truncate("clean", keep_last=2, adjust=True)
        await repository.fork("clean", new_conversation_id="forked")
        await repository.create_conversation("damaged")
        for n in range(3):
            await repository.append_messages(
                "damaged", [Message(role="user", content=f"question {n} about anchors")]
            )
        await repository.create_conversation("archived")
        await repository.archive("archived")
        # Erased: its tombstone (the stream row and one purge event) is no damage.
        await repository.create_conversation("erased")
        await repository.append_messages("erased", [Message(role="user", content="forget me")])
        await repository.delete("erased")
    finally:
        await storage.close()


async def _problems(database_url: str) -> tuple[list[str], Verified]:
    storage = await PostgresStorage.connect(database_url)
    verified = Verified()
    try:
        return [str(p) async for p in verify_store(storage.pool, verified)], verified
    finally:
        await storage.close()


def _copy(database_url: str) -> str:
    url = make_url(database_url)
    name = f"{url.database}_copy_{uuid.uuid4().hex[:6]}"
    server = libpq_url(url.set(database="postgres").render_as_string(hide_password=False))
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{url.database}"')
    return url.set(database=name).render_as_string(hide_password=False)


def _drop(database_url: str) -> None:
    url = make_url(database_url)
    server = libpq_url(url.set(database="postgres").render_as_string(hide_password=False))
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)')


def _corrupt(database_url: str) -> None:
    """One damage per check, as a crash, a bad restore or a hand in psql would."""
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        damaged = "(SELECT id FROM conversations WHERE key = 'damaged')"
        # A lost event: versions 1, 2, 4.
        conn.execute(f"DELETE FROM events WHERE conversation_id = {damaged} AND version = 3")
        # A view that is not what the log says.
        conn.execute(
            "UPDATE messages SET token_estimate = token_estimate + 7"
            " WHERE conversation_id = (SELECT id FROM conversations WHERE key = 'clean')"
            " AND seq = 1"
        )
        # A carried member's copy of its body that is not its event's.
        conn.execute(
            "UPDATE batch_carried SET body = '{\"forged\": true}' WHERE ctid = (SELECT ctid"
            " FROM batch_carried WHERE body IS NOT NULL AND conversation_id ="
            " (SELECT id FROM conversations WHERE key = 'clean') LIMIT 1)"
        )
        # An event moved before its predecessor in the feed.
        conn.execute(
            "UPDATE events SET transaction_id = 1 WHERE version = 2"
            " AND conversation_id = (SELECT id FROM conversations WHERE key = 'archived')"
        )
        # A search index a build left unfinished.
        conn.execute(
            "UPDATE pg_index SET indisvalid = false"
            " WHERE indexrelid = 'ix_events_search_text'::regclass"
        )


def _convo_verify(database_url: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["verify"], env={"DATABASE_URL": database_url})
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def test_a_store_written_by_the_operations_verifies_clean(database_url: str) -> None:
    asyncio.run(_seed(database_url))
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        # Carried members with copies of their bodies, and one without, as a
        # release from before migration 0022 writes them: no damage either.
        copies = "SELECT count(*) FROM batch_carried WHERE body IS NOT NULL"
        assert (conn.execute(copies).fetchone() or (0,))[0] > 1
        conn.execute(
            "UPDATE batch_carried SET body = NULL, body_position = NULL"
            " WHERE ctid = (SELECT ctid FROM batch_carried WHERE body IS NOT NULL LIMIT 1)"
        )
    problems, verified = asyncio.run(_problems(database_url))
    assert problems == []
    assert verified.conversations == 5
    assert verified.search_probes > 0  # the search index was probed, not skipped
    code, out, err = _convo_verify(database_url)
    assert code == 0, out + err
    assert out == ""
    assert "5 conversation(s)" in err
    assert "OK" in err


def test_a_corrupted_copy_is_reported_one_line_per_problem(database_url: str) -> None:
    asyncio.run(_seed(database_url))
    copy = _copy(database_url)
    try:
        _corrupt(copy)
        code, out, err = _convo_verify(copy)
        lines = out.splitlines()
        assert code == 1, out + err
        assert "acme/damaged: versions: 3 events hold versions 1..4" in lines
        assert "acme/damaged: versions: the stream is at version 4, 3 events" in lines
        assert any(
            line.startswith("acme/clean: projections: messages differs from a rebuild")
            for line in lines
        ), lines
        assert "acme/clean: projections: 1 carried bodies differ from their events" in lines
        assert any(line.startswith("acme/archived: feed order:") for line in lines), lines
        assert any(
            line.startswith("store: search index: ix_events_search_text") for line in lines
        ), lines
        assert "problem(s)" in err
        # Verifying changed nothing: the damage is all still there.
        again, _ = asyncio.run(_problems(copy))
        assert sorted(again) == sorted(lines)
    finally:
        _drop(copy)
    # The original was never touched.
    assert asyncio.run(_problems(database_url))[0] == []
