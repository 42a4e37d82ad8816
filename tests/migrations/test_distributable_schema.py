"""The migrated schema stays ready to distribute on the conversation key.

A distributed PostgreSQL (Citus) shards a table on one column and can only
enforce a primary key or a unique constraint that contains that column,
and a foreign key only between rows of one shard (or to a reference table
copied to every node). docs/scaling.md plans the cluster: every table is
either distributed on its conversation (`conversations.id`, everywhere
else `conversation_id`) or a small reference table. This test reads the
catalog of a database migrated to head, so a migration that breaks the
plan — a unique index without the key, a table with no key, a foreign key
across conversations — fails here, before anyone tries to shard.
"""

from __future__ import annotations

import psycopg
import pytest

from hosting.settings import libpq_url

# The column each distributed table is sharded on (docs/scaling.md).
DISTRIBUTED = {
    "conversations": "id",
    "events": "conversation_id",
    "messages": "conversation_id",
    "tool_calls": "conversation_id",
    "batches": "conversation_id",
    "batch_carried": "conversation_id",
    "agent_profiles": "conversation_id",
    "context_slots": "conversation_id",
    "append_requests": "conversation_id",
}
# Small tables every node gets a copy of; alembic's own bookkeeping.
REFERENCE = {"api_keys", "alembic_version"}

pytestmark = pytest.mark.integration

TABLES = """
SELECT c.relname FROM pg_class c
 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
   AND NOT c.relispartition
"""
# Every unique index (primary keys and unique constraints have one), with
# its key columns by name; an expression column has no name (attnum 0).
UNIQUE_INDEXES = """
SELECT t.relname, i.relname,
       array(SELECT coalesce(a.attname, '(expression)')
               FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
               LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
              ORDER BY k.n)
  FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_class t ON t.oid = x.indrelid
 WHERE x.indisunique AND t.relnamespace = 'public'::regnamespace
"""
FOREIGN_KEYS = """
SELECT conrelid::regclass::text, confrelid::regclass::text, conname,
       array(SELECT attname FROM pg_attribute
              WHERE attrelid = conrelid AND attnum = ANY (conkey)),
       array(SELECT attname FROM pg_attribute
              WHERE attrelid = confrelid AND attnum = ANY (confkey))
  FROM pg_constraint
 WHERE contype = 'f' AND connamespace = 'public'::regnamespace
"""
EXCLUSIONS = """
SELECT conrelid::regclass::text, conname FROM pg_constraint
 WHERE contype = 'x' AND connamespace = 'public'::regnamespace
"""


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute(sql).fetchall()


def test_every_table_is_distributed_on_its_conversation_or_a_reference_table(
    database_url: str,
) -> None:
    tables = {str(name) for (name,) in _rows(database_url, TABLES)}
    unplanned = tables - DISTRIBUTED.keys() - REFERENCE
    assert unplanned == set(), "a new table: add it to docs/scaling.md's plan and to this test"
    assert DISTRIBUTED.keys() <= tables


def test_every_unique_index_of_a_distributed_table_holds_its_key(database_url: str) -> None:
    wrong = [
        f"{table}.{index} on {columns}"
        for table, index, columns in _rows(database_url, UNIQUE_INDEXES)
        if table in DISTRIBUTED and DISTRIBUTED[str(table)] not in columns  # type: ignore[operator]
    ]
    assert wrong == []


def test_no_foreign_key_crosses_conversations(database_url: str) -> None:
    """A foreign key between distributed tables must join on the key (the
    rows are then on one shard); one into a reference table is fine."""
    wrong = []
    for table, target, name, columns, target_columns in _rows(database_url, FOREIGN_KEYS):
        if target in REFERENCE:
            continue
        own, theirs = DISTRIBUTED.get(str(table)), DISTRIBUTED.get(str(target))
        joined = dict(zip(columns, target_columns, strict=True))  # type: ignore[call-overload]
        if own is None or theirs is None or joined.get(own) != theirs:
            wrong.append(f"{table}.{name} -> {target}")
    assert wrong == []


def test_no_exclusion_constraint(database_url: str) -> None:
    """Citus cannot enforce an exclusion constraint across shards."""
    assert _rows(database_url, EXCLUSIONS) == []
