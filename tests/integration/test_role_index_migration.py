"""Migration 0012 replaces the per-role tables by per-role indexes of
`messages` without changing any role read: a database upgraded from 0011
answers them as before, its views show the rows the tables held, and
downgrading rebuilds the tables row for row."""

from __future__ import annotations

from typing import Any

from hosting.settings import Settings
from store.domain.messages import ROLES
from store.repository import Repository
from tests.integration.test_membership_migration import migrate_to, parent_and_fork, table_rows

BEFORE = "0011_members_carried"
INDEX_ROWS = "SELECT conversation_id, role, ordinal, seq FROM message_role_index ORDER BY 1, 2, 3"


async def _role_reads(repository: Repository, keys: list[str]) -> list[Any]:
    seen: list[Any] = []
    for key in keys:
        for role in ROLES:
            seen.append(await repository.recent_by_role(key, role, 4, scope="history"))
            seen.append(
                await repository.recent_by_role(key, role, 4, scope="history", agent_id="helper")
            )
            seen.append(await repository.role_range(key, role, 2, 5))
        seen.append(await repository.count_by_role(key, scope="history"))
    return seen


async def test_role_reads_survive_the_migration_both_ways(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    keys = await parent_and_fork(repository)
    reads = await _role_reads(repository, keys)
    rows = table_rows(database_url, settings, INDEX_ROWS)  # the view
    assert len(rows) == table_rows(database_url, settings, "SELECT count(*) FROM messages")[0][0]

    migrate_to(database_url, settings, BEFORE, down=True)
    # Before 0012 the same rows were a partitioned table's.
    assert table_rows(database_url, settings, INDEX_ROWS) == rows
    kind = "SELECT relkind FROM pg_class WHERE relname = 'message_role_index_user'"
    assert table_rows(database_url, settings, kind) == [("r",)]

    migrate_to(database_url, settings, "head")
    assert table_rows(database_url, settings, kind) == [("v",)]
    assert table_rows(database_url, settings, INDEX_ROWS) == rows
    assert await _role_reads(repository, keys) == reads
