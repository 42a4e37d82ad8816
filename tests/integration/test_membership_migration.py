"""Migration 0011 moves batch membership without changing any window: a
database written before it (every message a `batch_members` row) reads the
same after it (arrivals are the messages' own rows, `batch_carried` the
rest), and downgrading restores the old table row for row."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from hosting import migrate
from hosting.engines import make_sync_engine
from hosting.settings import Settings
from store.domain.messages import Message
from store.repository import Repository
from tests.integration.test_forks import rich_parent

BEFORE = "0010_search_pending_list"
MEMBERS = "SELECT conversation_id, batch, sort_key, seq FROM batch_members ORDER BY 1, 2, 3"


async def _windows(repository: Repository, keys: list[str]) -> list[Any]:
    """Every window of every conversation as the repository reads it."""
    seen: list[Any] = []
    for key in keys:
        for agent in (None, "main", "helper"):
            seen.append(await repository.visible_window(key, agent_id=agent))
            seen.append(await repository.recent_by_role(key, "user", 3, agent_id=agent))
        for batch in await repository.batches(key):
            seen.append(await repository.visible_window(key, batch=batch.number))
        seen.append(await repository.count_by_role(key))
        seen.append((await repository.assemble(key, format="anthropic")).payload)
        seen.append(await repository.read_messages(key, scope="visible", limit=1000))
    return seen


def table_rows(url: str, settings: Settings, statement: str) -> list[tuple[Any, ...]]:
    engine = make_sync_engine(url, settings)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(statement))]
    finally:
        engine.dispose()


def migrate_to(url: str, settings: Settings, revision: str, *, down: bool = False) -> None:
    engine = make_sync_engine(url, settings)
    try:
        (migrate.downgrade if down else migrate.upgrade)(engine, revision)
    finally:
        engine.dispose()


async def parent_and_fork(repository: Repository) -> list[str]:
    """A parent with batches of two agents, and a fork with a message of its
    own: the keys of both."""
    parent = await rich_parent(repository)
    fork = await repository.fork(parent, agent_id="helper")
    await repository.append_messages(fork.id, [Message(role="user", content="after the fork")])
    return [parent, fork.id]


async def test_membership_survives_the_migration_both_ways(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    keys = await parent_and_fork(repository)
    windows = await _windows(repository, keys)
    members = table_rows(database_url, settings, MEMBERS)
    arrivals = table_rows(database_url, settings, "SELECT count(*) FROM messages")[0][0]
    carried = table_rows(database_url, settings, "SELECT count(*) FROM batch_carried")[0][0]
    assert carried > 0  # the batch operations carried windows over
    assert len(members) == arrivals + carried

    migrate_to(database_url, settings, BEFORE, down=True)
    # Before 0011 every member, arrivals included, was a row of the table.
    assert table_rows(database_url, settings, MEMBERS) == members
    assert table_rows(database_url, settings, "SELECT to_regclass('batch_carried')") == [(None,)]

    migrate_to(database_url, settings, "head")
    assert table_rows(database_url, settings, MEMBERS) == members
    assert table_rows(database_url, settings, "SELECT count(*) FROM batch_carried") == [(carried,)]
    assert await _windows(repository, keys) == windows
