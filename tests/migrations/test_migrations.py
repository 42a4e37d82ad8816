"""Migrations tested as code: the four pytest-alembic checks."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from store import migrate
from store.db import make_sync_engine
from store.settings import Settings
from store.tables import include_name, metadata


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
