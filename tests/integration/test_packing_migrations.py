"""Migrations 0014-0016 change how rows are laid out, never what they hold:
a database written before them reads the same after them, every row of
`events`, `messages` and `tool_calls` keeps its values, and downgrading
restores the old layout with the same values."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg

from hosting.settings import Settings, libpq_url
from store.domain.messages import Message, ToolCall
from store.domain.search import SearchQuery
from store.postgres import PostgresStorage, search_indexes
from store.repository import Repository
from tests.integration.test_membership_migration import (
    migrate_to,
    parent_and_fork,
    table_rows,
)

BEFORE = "0013_append_only_indexes_full"
ROWS = {
    "events": "SELECT conversation_id, version, type::text, data::text, recorded_at,"
    " transaction_id, position FROM events ORDER BY 1, 2",
    "messages": "SELECT conversation_id, seq, event_version, edit_version, batch, role_ordinal,"
    " token_estimate, is_error, pinned, sort_key, role, agent_id, kind, tool_call_id,"
    " client_message_id FROM messages ORDER BY 1, 2",
    "tool_calls": "SELECT * FROM tool_calls ORDER BY conversation_id, call_id",
    "role views": "SELECT * FROM message_role_index ORDER BY 1, 2, 3",
}


async def _reads(repository: Repository, keys: list[str]) -> list[Any]:
    seen: list[Any] = []
    for key in keys:
        seen.append(await repository.read_messages(key, limit=1000))
        seen.append(await repository.visible_window(key))
        seen.append(await repository.role_range(key, "assistant", 1, 3))
        seen.append(await repository.tool_blocks(key))
        seen.append(await repository.tool_blocks(key, pending_only=True))
        seen.append((await repository.assemble(key, format="openai-chat")).payload)
        seen.append(await repository.conversation_events(key, limit=1000))
    return seen


@asynccontextmanager
async def _started(url: str, settings: Settings) -> AsyncIterator[Repository]:
    """The store as it starts after an upgrade: new connections (an older
    pool's prepared statements knew the old row types)."""
    storage = await PostgresStorage.connect(url, options=settings.connection_options())
    try:
        yield Repository(storage)
    finally:
        await storage.close()


def _rows(url: str, settings: Settings) -> dict[str, list[tuple[Any, ...]]]:
    return {name: table_rows(url, settings, statement) for name, statement in ROWS.items()}


async def test_rows_and_reads_survive_the_migrations_both_ways(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    keys = await parent_and_fork(repository)
    # A call left pending: the pending reads lost their index (0014).
    await repository.append_messages(
        keys[0],
        [
            Message(
                role="assistant",
                content="",
                tool_calls=[ToolCall(id="still_open", name="search", arguments={"q": "x"})],
            )
        ],
    )
    reads = await _reads(repository, keys)
    rows = _rows(database_url, settings)
    assert all(rows.values())

    migrate_to(database_url, settings, BEFORE, down=True)
    assert _rows(database_url, settings) == rows
    assert table_rows(database_url, settings, "SELECT to_regtype('event_type')") == [(None,)]

    migrate_to(database_url, settings, "head")
    assert _rows(database_url, settings) == rows
    async with _started(database_url, settings) as upgraded:
        assert await _reads(upgraded, keys) == reads
        # Written after the upgrade, a message is read as any other.
        await upgraded.append_messages(keys[1], [Message(role="user", content="after")])
        (last,) = await upgraded.read_messages(keys[1], order="desc", limit=1)
        assert last.content == "after"


def _search_indexes(url: str, settings: Settings) -> list[tuple[Any, ...]]:
    return table_rows(
        url,
        settings,
        "SELECT i.indexrelid::regclass::text, i.indisvalid FROM pg_index AS i"
        " WHERE i.indrelid = 'events'::regclass"
        " AND i.indexrelid::regclass::text LIKE 'ix_events_search_%' ORDER BY 1",
    )


async def test_the_search_indexes_an_operator_built_survive_the_type_change(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    """Migration 0015 drops the search indexes (partial on the type) and
    builds again those the database had, the opt-in substring one too."""
    await parent_and_fork(repository)
    migrate_to(database_url, settings, BEFORE, down=True)
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        search_indexes.enable(conn, "substring")
    before = _search_indexes(database_url, settings)
    assert len(before) == 2

    migrate_to(database_url, settings, "head")
    assert _search_indexes(database_url, settings) == before
    async with _started(database_url, settings) as upgraded:
        for mode in ("text", "substring"):
            page = await upgraded.search_messages(SearchQuery(q="fork", mode=mode))
            assert page.hits, mode
