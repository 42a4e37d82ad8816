"""Migrations tested as code: the four pytest-alembic checks."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from hosting import migrate
from hosting.engines import make_sync_engine
from hosting.settings import Settings
from hosting.tables import include_name, metadata
from store.domain.events import EVENT_TYPES


def test_single_head() -> None:
    assert len(migrate.heads()) == 1


def test_every_revision_has_a_downgrade_path_to_base() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    revisions = list(script.walk_revisions("base", "heads"))
    assert revisions
    assert revisions[-1].down_revision is None


def test_upgrade_to_head_builds_the_models(empty_database_url: str, settings: Settings) -> None:
    engine = make_sync_engine(empty_database_url, settings)
    try:
        migrate.upgrade(engine)
        tables = set(inspect(engine).get_table_names())
        assert set(metadata.tables) <= tables
    finally:
        engine.dispose()


def test_models_match_the_migrated_schema(empty_database_url: str, settings: Settings) -> None:
    engine = make_sync_engine(empty_database_url, settings)
    try:
        migrate.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_name": include_name,
                },
            )
            differences = compare_metadata(context, metadata)
        assert differences == [], f"models and migrations disagree: {differences}"
    finally:
        engine.dispose()


def test_downgrade_and_upgrade_round_trip(empty_database_url: str, settings: Settings) -> None:
    engine = make_sync_engine(empty_database_url, settings)
    try:
        script = ScriptDirectory.from_config(migrate.alembic_config())
        revisions = [r.revision for r in script.walk_revisions("base", "heads")][::-1]
        for revision in revisions:
            migrate.upgrade(engine, revision)
        for _ in revisions:
            migrate.downgrade(engine, "-1")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        migrate.upgrade(engine, "head")
        assert set(metadata.tables) <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _catalogue_after_upgrade(url: str, settings: Settings, *queries: str) -> list[list[Any]]:
    """Each of `queries`' rows, in a database migrated to the head."""
    engine = make_sync_engine(url, settings)
    try:
        migrate.upgrade(engine)
        with engine.connect() as conn:
            return [list(conn.exec_driver_sql(query).all()) for query in queries]
    finally:
        engine.dispose()


def test_one_index_and_one_view_per_role(empty_database_url: str, settings: Settings) -> None:
    """Each role has a unique index of `messages` (its look-ups) and a
    relation of its own name (a view: people's queries), migration 0012."""
    indexes, views = _catalogue_after_upgrade(
        empty_database_url,
        settings,
        "SELECT indexname, indexdef FROM pg_indexes"
        " WHERE tablename = 'messages' AND indexname LIKE 'uq_messages_role_%%'"
        " ORDER BY indexname",
        "SELECT viewname FROM pg_views WHERE viewname LIKE 'message_role_index%%'"
        " ORDER BY viewname",
    )
    assert [(name, definition.split(" USING ")[1]) for name, definition in indexes] == [
        (
            f"uq_messages_role_{role}",
            "btree (conversation_id, role_ordinal) WITH (fillfactor='100')"
            f" WHERE (role = '{role}'::text)",
        )
        for role in ("assistant", "system", "tool", "user")
    ]
    assert [v for (v,) in views] == [
        "message_role_index",
        "message_role_index_assistant",
        "message_role_index_system",
        "message_role_index_tool",
        "message_role_index_user",
    ]


def test_append_only_indexes_fill_their_pages(empty_database_url: str, settings: Settings) -> None:
    """Keys that only grow leave no room in a page for inserts that never
    come (migration 0013)."""
    (full,) = _catalogue_after_upgrade(
        empty_database_url,
        settings,
        "SELECT relname FROM pg_class WHERE relkind = 'i'"
        " AND 'fillfactor=100' = ANY(reloptions) ORDER BY relname",
    )
    assert [name for (name,) in full] == sorted(
        [
            "ix_events_feed",
            "ix_messages_batch",
            "pk_events",
            "pk_messages",
            *(f"uq_messages_role_{role}" for role in ("system", "user", "assistant", "tool")),
        ]
    )


def test_event_types_are_the_enum(empty_database_url: str, settings: Settings) -> None:
    """The `event_type` enum names every event type `store.domain.events` defines,
    in order (migration 0015): a new one needs `ALTER TYPE … ADD VALUE`."""
    (labels,) = _catalogue_after_upgrade(
        empty_database_url,
        settings,
        "SELECT enumlabel FROM pg_enum WHERE enumtypid = 'event_type'::regtype"
        " ORDER BY enumsortorder",
    )
    assert tuple(label for (label,) in labels) == EVENT_TYPES


def test_a_tool_calls_completion_changes_no_indexed_column(
    empty_database_url: str, settings: Settings
) -> None:
    """No index of `tool_calls` names a column its completion sets, so the
    update is HOT: no new index entries (migration 0014)."""
    (columns,) = _catalogue_after_upgrade(
        empty_database_url,
        settings,
        "SELECT DISTINCT a.attname FROM pg_index AS i"
        " JOIN pg_attribute AS a ON a.attrelid = i.indrelid"
        " WHERE i.indrelid = 'tool_calls'::regclass AND a.attnum > 0"
        " AND (a.attnum = ANY(i.indkey)"
        "  OR strpos(pg_get_expr(i.indpred, i.indrelid), a.attname) > 0)",
    )
    assert {name for (name,) in columns}.isdisjoint({"status", "result_seq", "is_error"})


def test_messages_columns_are_in_alignment_order(
    empty_database_url: str, settings: Settings
) -> None:
    """Fixed-width columns first, widest first (migration 0016): no padding
    between them."""
    (columns,) = _catalogue_after_upgrade(
        empty_database_url,
        settings,
        "SELECT attlen FROM pg_attribute WHERE attrelid = 'messages'::regclass"
        " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
    )
    widths = [length if length > 0 else 0 for (length,) in columns]  # -1: variable
    assert widths == sorted(widths, reverse=True)
