"""Migrations tested as code: the four pytest-alembic checks."""

from __future__ import annotations

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


def test_one_index_table_per_role(empty_database_url: str, settings: Settings) -> None:
    engine = make_sync_engine(empty_database_url, settings)
    try:
        migrate.upgrade(engine)
        with engine.connect() as conn:
            partitions = conn.exec_driver_sql(
                "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
                " JOIN pg_class c ON c.oid = i.inhrelid"
                " JOIN pg_class p ON p.oid = i.inhparent"
                " WHERE p.relname = 'message_role_index' ORDER BY c.relname"
            ).all()
        assert [(name, bound) for name, bound in partitions] == [
            ("message_role_index_assistant", "FOR VALUES IN ('assistant')"),
            ("message_role_index_system", "FOR VALUES IN ('system')"),
            ("message_role_index_tool", "FOR VALUES IN ('tool')"),
            ("message_role_index_user", "FOR VALUES IN ('user')"),
        ]
    finally:
        engine.dispose()
