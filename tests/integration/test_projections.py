"""What the projections hold on PostgreSQL: the per-role tables, deletion,
rebuilding everything, and the demo session end to end."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner

from convo import app
from convo.demo import run_demo
from hosting.settings import Settings
from store.domain.conversation_keys import stream_id
from store.domain.errors import ConversationDeleted
from store.domain.messages import Message, ToolCall
from store.postgres import PostgresStorage, sql
from store.postgres.tables import PROJECTION_TABLES
from store.repository import Repository
from store.repository.rebuild import rebuild
from tests.integration.conftest import own_head, read_feed_until


async def _session(repo: Repository) -> str:
    cid = (await repo.create_conversation()).id
    await repo.append_messages(
        cid,
        [
            Message(role="system", content="be brief"),
            Message(role="user", content="one"),
            Message(role="assistant", content="", tool_calls=(ToolCall(id="c1", name="ls"),)),
            Message(role="tool", tool_call_id="c1", content="a b"),
            Message(role="user", content="two"),
            Message(role="assistant", content="done"),
        ],
    )
    return cid


async def _rows(storage: PostgresStorage, statement: str, params: Any = None) -> list[Any]:
    async with storage.pool.connection() as conn:
        cursor = await conn.execute(statement, params)
        return [tuple(r) for r in await cursor.fetchall()]


async def _assert_no_view_rows(storage: PostgresStorage, stream: Any, why: str) -> None:
    """No projection table holds a row of the conversation `stream`."""
    for table in PROJECTION_TABLES:
        [(left,)] = await _rows(
            storage, f"SELECT count(*) FROM {table.name} WHERE conversation_id = %s", (stream,)
        )
        assert left == 0, f"{table.name}: {why}"


async def test_each_role_has_its_own_index_table(
    storage: PostgresStorage, repository: Repository
) -> None:
    cid = await _session(repository)
    sid = stream_id(repository.tenant, cid)
    counts = {
        role: (
            await _rows(
                storage,
                f"SELECT array_agg(ordinal ORDER BY ordinal) FROM message_role_index_{role}"
                " WHERE conversation_id = %s",
                (sid,),
            )
        )[0][0]
        for role in ("system", "user", "assistant", "tool")
    }
    assert counts == {"system": [1], "user": [1, 2], "assistant": [1, 2], "tool": [1]}


def _plan(rows: list[Any]) -> str:
    return "\n".join(r[0] for r in rows)


async def test_a_role_read_goes_by_its_roles_index(
    storage: PostgresStorage, repository: Repository
) -> None:
    """The storage's role reads find their rows through the role's own index
    of `messages` (migration 0012), never another role's. Sequential scans
    are priced out, as in a database where the conversation is one of many:
    in this test database a few hundred rows are cheaper to scan."""
    cid = await _session(repository)
    sid = stream_id(repository.tenant, cid)
    params = {
        "cid": sid,
        "tenant": repository.tenant,
        "role": "user",
        "agent": None,
        "n": 3,
        "first": 1,
        "last": 2,
    }
    for statement in (sql.recent_in_history("user"), sql.role_range("user")):
        async with storage.pool.connection() as conn, conn.transaction():
            await conn.execute("SET LOCAL enable_seqscan = off")
            cursor = await conn.execute(f"EXPLAIN {statement}", params)
            plan = _plan([tuple(r) for r in await cursor.fetchall()])
        assert "uq_messages_role_user" in plan, (statement, plan)
        for other in ("system", "assistant", "tool"):
            assert f"uq_messages_role_{other}" not in plan, (statement, plan)


async def test_delete_purges_everything_but_a_tombstone(
    storage: PostgresStorage, repository: Repository
) -> None:
    start = await own_head(storage)
    cid = await _session(repository)
    sid = stream_id(repository.tenant, cid)
    await repository.update_slot(cid, "useful_info", "x")
    await repository.delete(cid)

    await _assert_no_view_rows(storage, sid, "kept rows of a deleted conversation")
    remaining = await _rows(
        storage, "SELECT version, type, data FROM events WHERE conversation_id = %s", (sid,)
    )
    [(deleted_at, metadata)] = await _rows(
        storage, "SELECT deleted_at, metadata FROM conversations WHERE id = %s", (sid,)
    )
    [(requests,)] = await _rows(
        storage, "SELECT count(*) FROM append_requests WHERE conversation_id = %s", (sid,)
    )
    assert remaining == [(9, "conversation_deleted", {})]  # 1 start, 6 messages, 1 slot
    assert deleted_at is not None
    assert metadata == {}
    assert requests == 0
    # Feed readers learn of the deletion, and of nothing else that was purged.
    feed = await read_feed_until(storage, start, 1)
    assert [(e.type, e.version) for e in feed if e.conversation_id == sid] == [
        ("conversation_deleted", 9)
    ]
    with pytest.raises(ConversationDeleted):
        await repository.visible_window(cid)
    with pytest.raises(ConversationDeleted):
        await repository.append_messages(cid, [Message(role="user", content="again")])


async def test_rebuild_of_all_conversations_restores_dropped_views(
    storage: PostgresStorage, repository: Repository
) -> None:
    first, second, gone = (
        await _session(repository),
        await _session(repository),
        await _session(repository),
    )
    await repository.truncate(second, keep_last=2)
    await repository.archive(second)
    await repository.delete(gone)

    async def state(cid: str) -> tuple[Any, ...]:
        return (
            await repository.get_conversation(cid),
            await repository.visible_window(cid),
            await repository.visible_window(cid, batch=1),
            await repository.batches(cid),
            await repository.tool_blocks(cid),
            await repository.count_by_role(cid, scope="history"),
        )

    before = {cid: await state(cid) for cid in (first, second)}
    async with storage.pool.connection() as conn:
        for table in PROJECTION_TABLES:
            await conn.execute(f"DELETE FROM {table.name}")
        await conn.execute(
            "UPDATE conversations SET next_seq = 99, current_batch = 9, archived_at = NULL"
        )

    report = await rebuild(storage)

    assert report.conversations == 3
    assert {cid: await state(cid) for cid in (first, second)} == before
    with pytest.raises(ConversationDeleted):
        await repository.visible_window(gone)
    await _assert_no_view_rows(storage, gone, "rebuild gave the deleted conversation rows")


def _stored_session(database_url: str) -> str:
    """`_session` run on its own connection, for the commands' tests."""

    async def store_session() -> str:
        storage = await PostgresStorage.connect(database_url)
        try:
            return await _session(Repository(storage))
        finally:
            await storage.close()

    return asyncio.run(store_session())


def test_rebuild_command(database_url: str) -> None:
    result = CliRunner().invoke(app, ["rebuild"], env={"DATABASE_URL": database_url})
    assert result.exit_code == 0, result.output
    assert "rebuilt 0 conversation(s)" in result.output


def test_rebuild_command_rebuilds_one_conversation(database_url: str) -> None:
    cid = _stored_session(database_url)
    env = {"DATABASE_URL": database_url}
    result = CliRunner().invoke(app, ["rebuild", "-c", str(cid)], env=env)
    assert result.exit_code == 0, result.output
    assert "rebuilt 1 conversation(s) from 7 events" in result.output


def test_rebuild_command_names_a_bad_id(database_url: str) -> None:
    result = CliRunner().invoke(app, ["rebuild", "-c", " nope"], env={"DATABASE_URL": database_url})
    assert result.exit_code == 2
    assert "not a conversation id: a conversation id cannot start or end with whitespace" in (
        " ".join(result.output.split())
    )


async def test_demo_session_runs_end_to_end(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_demo(database_url, Settings.from_env(), where="test database")
    shown = capsys.readouterr().out
    assert "last 3 user messages" in shown
    assert "compaction, dry run" in shown
    assert "compacted" in shown
    assert "summary" in shown  # the compaction's summary message, in the window
    assert "search: text 'tokenizer'" in shown
    assert "(JSON Lines, typed)" in shown
    assert "[x] Find" in shown  # rich markup must not eat "[x]"


def test_assemble_command_builds_a_stored_conversations_payload(database_url: str) -> None:
    cid = _stored_session(database_url)
    runner = CliRunner()
    env = {"DATABASE_URL": database_url}
    result = runner.invoke(app, ["assemble", "-f", "gemini", "-c", str(cid)], env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)["payload"]
    assert [c["role"] for c in payload["contents"]] == ["user", "model", "user", "model"]

    missing = runner.invoke(app, ["assemble", "-f", "gemini", "-c", str(uuid.uuid4())], env=env)
    assert missing.exit_code == 2
    assert "does not exist" in missing.output
