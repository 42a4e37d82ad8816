"""What the projections hold on PostgreSQL: the per-role tables, deletion,
rebuilding everything, and the demo session end to end."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine
from typer.testing import CliRunner

from store.cli import app
from store.db import make_async_engine
from store.demo import run_demo
from store.errors import ConversationDeleted
from store.log import EventLog
from store.messages import Message, ToolCall
from store.postgres import PostgresRepository
from store.projections.tables import PROJECTION_TABLES
from store.rebuild import rebuild
from store.records import FeedPosition
from store.schema import conversations, events
from store.settings import Settings


async def _session(repo: PostgresRepository) -> uuid.UUID:
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


async def test_each_role_has_its_own_index_table(engine: AsyncEngine) -> None:
    cid = await _session(PostgresRepository(engine))
    async with engine.connect() as conn:
        counts = {
            role: (
                await conn.execute(
                    text(
                        f"SELECT array_agg(ordinal ORDER BY ordinal) FROM message_role_index_{role}"
                        " WHERE conversation_id = :c"
                    ),
                    {"c": cid},
                )
            ).scalar_one()
            for role in ("system", "user", "assistant", "tool")
        }
    assert counts == {"system": [1], "user": [1, 2], "assistant": [1, 2], "tool": [1]}


async def test_a_role_query_reads_only_its_partition(engine: AsyncEngine) -> None:
    cid = await _session(PostgresRepository(engine))
    async with engine.connect() as conn:
        plan = "\n".join(
            r[0]
            for r in await conn.execute(
                text(
                    "EXPLAIN SELECT seq FROM message_role_index WHERE conversation_id = :c"
                    " AND role = 'user' ORDER BY ordinal DESC LIMIT 3"
                ),
                {"c": cid},
            )
        )
    assert "message_role_index_user" in plan
    assert "message_role_index_assistant" not in plan


async def test_delete_purges_everything_but_a_tombstone(engine: AsyncEngine) -> None:
    repo = PostgresRepository(engine)
    start = await EventLog(engine).feed_head()
    cid = await _session(repo)
    await repo.delete(cid)

    async with engine.connect() as conn:
        for table in PROJECTION_TABLES:
            left = (
                await conn.execute(
                    select(func.count()).select_from(table).where(table.c.conversation_id == cid)
                )
            ).scalar_one()
            assert left == 0, f"{table.name} kept rows of a deleted conversation"
        remaining = list(
            (
                await conn.execute(select(events.c.type).where(events.c.conversation_id == cid))
            ).scalars()
        )
        tombstone = (
            await conn.execute(select(conversations.c.deleted_at).where(conversations.c.id == cid))
        ).scalar_one()
    assert remaining == ["conversation_deleted"]
    assert tombstone is not None
    feed = await EventLog(engine).read_feed(start or FeedPosition.start())
    assert [e.type for e in feed if e.conversation_id == cid] == ["conversation_deleted"]
    with pytest.raises(ConversationDeleted):
        await repo.visible_window(cid)
    with pytest.raises(ConversationDeleted):
        await repo.append_messages(cid, [Message(role="user", content="again")])


async def test_rebuild_of_all_conversations_restores_dropped_views(engine: AsyncEngine) -> None:
    repo = PostgresRepository(engine)
    first, second = await _session(repo), await _session(repo)
    await repo.truncate(second, keep_last=2)
    before = {cid: await repo.visible_window(cid) for cid in (first, second)}
    async with engine.begin() as conn:
        for table in PROJECTION_TABLES:
            await conn.execute(table.delete())
    report = await rebuild(engine)
    assert report.conversations == 2
    assert {cid: await repo.visible_window(cid) for cid in (first, second)} == before


def test_rebuild_command(database_url: str) -> None:
    result = CliRunner().invoke(app, ["rebuild"], env={"DATABASE_URL": database_url})
    assert result.exit_code == 0, result.output
    assert "rebuilt 0 conversation(s)" in result.output


def test_rebuild_command_names_a_bad_id(database_url: str) -> None:
    result = CliRunner().invoke(app, ["rebuild", "-c", "nope"], env={"DATABASE_URL": database_url})
    assert result.exit_code == 2
    assert "not a conversation id: nope" in result.output


async def test_demo_session_runs_end_to_end(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_demo(database_url, Settings.from_env(), where="test database")
    shown = capsys.readouterr().out
    assert "last 3 user messages" in shown
    assert "Summary so far" in shown
    assert "[x] Find" in shown  # rich markup must not eat "[x]"


def test_assemble_command_builds_a_stored_conversations_payload(database_url: str) -> None:
    async def store_session() -> uuid.UUID:
        engine = make_async_engine(database_url, Settings.from_env())
        try:
            return await _session(PostgresRepository(engine))
        finally:
            await engine.dispose()

    cid = asyncio.run(store_session())
    runner = CliRunner()
    env = {"DATABASE_URL": database_url}
    result = runner.invoke(app, ["assemble", "-f", "gemini", "-c", str(cid)], env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)["payload"]
    assert [c["role"] for c in payload["contents"]] == ["user", "model", "user", "model"]

    missing = runner.invoke(app, ["assemble", "-f", "gemini", "-c", str(uuid.uuid4())], env=env)
    assert missing.exit_code == 2
    assert "does not exist" in missing.output
