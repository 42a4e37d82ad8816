"""Property: projections rebuilt from the log equal the inline ones, row for row.

Hypothesis drives random histories through the PostgreSQL repository —
appends (with parallel tool calls, results, reminders, sub-agent messages),
edits, pins, slot updates, agent configuration and every batch operation,
each on the window of one of several agents, some of them invalid on
purpose (a refused operation must write nothing) — then
snapshots every projection table of the conversation and the projected
columns of its `conversations` row (the views' head, archiving, metadata),
rebuilds it from its events, and compares.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st

from hosting.settings import Settings
from store.domain.context import AgentProfile, TodoItem
from store.domain.conversation_keys import stream_id
from store.domain.errors import ConvoStoreError
from store.domain.messages import Message, ToolCall
from store.postgres import PostgresStorage
from store.postgres.tables import PROJECTION_TABLES
from store.repository import Repository
from store.repository.rebuild import rebuild

AGENTS = ("main", "main", "main", "helper", "helper", "critic")
WORDS = st.sampled_from(["alpha", "beta", "todo", "error", "fix the parser", "ok", "日本"])


@dataclass
class Driver:
    """Keeps what the generated operations need to stay mostly valid."""

    repo: Repository
    conversation: str
    pending: dict[str, list[str]] = field(default_factory=dict)  # agent → open call ids
    calls: int = 0
    refused: int = 0

    async def run(self, operation: tuple[Any, ...]) -> None:
        try:
            await self._apply(operation)
        except ConvoStoreError:
            # Refused operations are part of the property: they write nothing.
            self.refused += 1

    async def _apply(self, op: tuple[Any, ...]) -> None:
        kind, agent, words, number = op
        cid, repo = self.conversation, self.repo
        text = " ".join(words) or "x"
        pending = self.pending.setdefault(agent, [])
        if kind == "user":
            await repo.append_messages(cid, [Message(role="user", content=text, agent_id=agent)])
        elif kind == "reminder":
            message = Message(role="system", content=text, kind="reminder", agent_id=agent)
            await repo.append_messages(cid, [message])
        elif kind == "calls":
            ids = [f"call_{self.calls + i}" for i in range(1 + number % 3)]
            self.calls += len(ids)
            calls = tuple(ToolCall(id=i, name="read", arguments={"n": number}) for i in ids)
            message = Message(role="assistant", content=text, tool_calls=calls, agent_id=agent)
            await repo.append_messages(cid, [message])
            pending.extend(ids)
        elif kind == "results" and pending:
            answered = pending[: 1 + number % len(pending)]
            results = [
                Message(
                    role="tool",
                    tool_call_id=i,
                    content=text,
                    agent_id=agent,
                    is_error=number % 5 == 0,
                )
                for i in answered
            ]
            await repo.append_messages(cid, results)
            del pending[: len(answered)]
        elif kind == "assistant":
            await repo.append_messages(
                cid, [Message(role="assistant", content=text, agent_id=agent)]
            )
        elif kind == "edit":
            await repo.replace(cid, 1 + number % 30, f"edited {text}")
        elif kind == "todo":
            items = [TodoItem(id=str(i), content=w, status="pending") for i, w in enumerate(words)]
            await repo.update_slot(cid, "todo", items or None, agent_id=agent)
        elif kind == "slot":
            await repo.update_slot(
                cid, ["useful_info", "folder_notes", "notes"][number % 3], text or None
            )
        elif kind == "configure":
            profile = AgentProfile(
                agent_id=agent,
                is_sub_agent=agent != "main",
                role_definition=text,
                system_prompt=None,
            )
            await repo.configure_agent(cid, profile)
        elif kind == "truncate":
            await repo.truncate(cid, keep_last=number % 12, adjust=number % 2 == 0, agent_id=agent)
        elif kind == "filter":
            await repo.filter(
                cid,
                content_excludes=[words[0]] if words else ["zzz"],
                adjust=True,
                agent_id=agent,
            )
        elif kind == "clear":
            await repo.clear(cid, keep_system=number % 2 == 0, adjust=True, agent_id=agent)
        elif kind == "start_batch":
            summary = Message(role="user", content=f"summary: {text}") if number % 2 else None
            await repo.start_batch(
                cid, 1 + number % 30, summary=summary, adjust=number % 3 != 0, agent_id=agent
            )
        elif kind == "insert":
            await repo.insert(cid, number % 6, [Message(role="user", content=text)], agent_id=agent)
        elif kind == "rollback":
            await repo.rollback_to_batch(cid, 1 + number % 7, agent_id=agent)
        elif kind == "pin":
            await repo.pin_message(cid, 1 + number % 30, pinned=number % 3 != 0)
        elif kind == "archive":
            await repo.archive(cid)
        elif kind == "unarchive":
            await repo.unarchive(cid)
        elif kind == "metadata":
            patch: dict[str, Any] = {w: (number if i else None) for i, w in enumerate(words)}
            await repo.update_metadata(cid, patch, replace=number % 7 == 0)


operations = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "user",
                "user",
                "calls",
                "calls",
                "results",
                "results",
                "results",
                "assistant",
                "reminder",
                "edit",
                "todo",
                "slot",
                "configure",
                "truncate",
                "filter",
                "clear",
                "start_batch",
                "insert",
                "rollback",
                "pin",
                "archive",
                "unarchive",
                "unarchive",
                "metadata",
            ]
        ),
        st.sampled_from(AGENTS),
        st.lists(WORDS, max_size=3),
        st.integers(min_value=0, max_value=1000),
    ),
    min_size=5,
    max_size=40,
)


# What the projector writes into the stream's own row: its other columns
# (version, tenant, created_at, updated_at, deleted_at) are the log's, not
# a view's.
PROJECTED_CONVERSATION_COLUMNS = (
    "next_seq",
    "current_batch",
    "agent_batches",
    "archived_at",
    "metadata",
)
SPOIL_CONVERSATION = (
    "UPDATE conversations SET next_seq = next_seq + 100, current_batch = current_batch + 10,"
    """ agent_batches = '{"spoiled": 7}',"""
    " archived_at = CASE WHEN archived_at IS NULL THEN now() END,"
    """ metadata = '{"spoiled": true}' WHERE id = %s"""
)


async def snapshot(
    storage: PostgresStorage, conversation: uuid.UUID
) -> dict[str, list[tuple[Any, ...]]]:
    tables: dict[str, list[tuple[Any, ...]]] = {}
    async with storage.pool.connection() as conn:
        for table in PROJECTION_TABLES:
            columns = ", ".join(table.c.keys())
            cursor = await conn.execute(
                f"SELECT {columns} FROM {table.name} WHERE conversation_id = %s",
                (conversation,),
            )
            tables[table.name] = sorted((tuple(r) for r in await cursor.fetchall()), key=repr)
        cursor = await conn.execute(
            f"SELECT {', '.join(PROJECTED_CONVERSATION_COLUMNS)} FROM conversations WHERE id = %s",
            (conversation,),
        )
        tables["conversations"] = [tuple(r) for r in await cursor.fetchall()]
    return tables


async def check_history(url: str, ops: list[tuple[Any, ...]]) -> tuple[int, int, int]:
    storage = await PostgresStorage.connect(
        url, options=Settings.from_env().connection_options(), max_size=2
    )
    try:
        repo = Repository(storage)
        key = (await repo.create_conversation(metadata={"ops": len(ops)})).id
        driver = Driver(repo, key)
        conversation = stream_id(repo.tenant, key)
        for op in ops:
            await driver.run(op)
        inline = await snapshot(storage, conversation)
        # Spoil the projected columns first (rebuilding empties the views'
        # tables itself): whatever the rebuild leaves, it derived from events.
        async with storage.pool.connection() as conn:
            await conn.execute(SPOIL_CONVERSATION, (conversation,))
        report = await rebuild(storage, conversation)
        rebuilt = await snapshot(storage, conversation)
        assert report.events == (await repo.get_conversation(key)).version
        assert report.conversations == 1
        assert (
            set(rebuilt) == set(inline) == {t.name for t in PROJECTION_TABLES} | {"conversations"}
        )
        for name in inline:
            assert rebuilt[name] == inline[name], f"{name} differs after rebuild"
        [(next_seq, current_batch, agent_batches, archived_at, metadata)] = inline["conversations"]
        now = await repo.get_conversation(key)
        main_batch = agent_batches.get("main", current_batch)
        assert (next_seq, main_batch) == (now.next_seq, now.current_batch)
        assert (archived_at is not None) == now.archived
        assert metadata == now.metadata
        return len(inline["messages"]), len(inline["batches"]), driver.refused
    finally:
        await storage.close()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_rebuilt_projections_equal_inline(database_url: str, ops: list[tuple[Any, ...]]) -> None:
    messages, batches, refused = asyncio.run(check_history(database_url, ops))
    # Steer towards long, batch-rich histories, and show what was covered.
    target(float(messages + 5 * batches))
    event(f"batches: {min(batches, 5)}+" if batches >= 5 else f"batches: {batches}")
    event("some operations refused" if refused else "no operation refused")
