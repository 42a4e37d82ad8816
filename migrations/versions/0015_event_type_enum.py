"""`events.type` as an enum: 4 bytes a row instead of the type's name.

Every event named its type in text: `message_appended`, 17 bytes in every
row of the log, and the column after it then began at the next 4-byte
boundary. An enum (`event_type`) keeps the same names and compares, sorts
and prints as before, in 4 bytes (what the events heap saved:
docs/storage.md, "What went, and what it cost").

The statements that write events are unchanged: they hand the type as text,
and an assignment cast (`text AS event_type`, through the types' text forms)
turns it into the enum on insert; an unknown name is refused there, as the
type's set is closed. A new event type therefore comes with a migration
(`ALTER TYPE event_type ADD VALUE '…'`), and
`tests/migrations/test_migrations.py` checks the enum names every event type
`store.domain.events` defines.

Upgrading rewrites the events table and rebuilds its indexes (the search
indexes are partial on the type, so they are dropped and built again after
it): on a large log run it in a maintenance window. Nothing in the log
changes but the column's type.

Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision: str = "0015_event_type_enum"
down_revision: str | None = "0014_tool_calls_in_place"

# Every event type as of this revision (`store.domain.events`), frozen here.
EVENT_TYPES = (
    "conversation_started",
    "message_appended",
    "message_edited",
    "agent_configured",
    "context_slot_updated",
    "batch_started",
    "message_pinned",
    "conversation_forked",
    "conversation_archived",
    "conversation_unarchived",
    "conversation_metadata_changed",
    "conversation_deleted",
)
SEARCH_INDEXES = ("ix_events_search_text", "ix_events_search_substring")
# Their predicate, spelled so that it holds for the text column and the enum.
CONTENT_EVENTS = " WHERE type IN ('message_appended', 'message_edited')"


def _without_search_indexes() -> list[str]:
    """Drop the search indexes this database has; their definitions, to
    build them again once the column has its new type."""
    found = op.get_bind().execute(
        text(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema()"
            " AND tablename = 'events' AND indexname = ANY(:names) ORDER BY indexname"
        ),
        {"names": list(SEARCH_INDEXES)},
    )
    definitions = [row[0].split(" WHERE ")[0] + CONTENT_EVENTS for row in found]
    for index in SEARCH_INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {index}")
    return definitions


def upgrade() -> None:
    definitions = _without_search_indexes()
    names = ", ".join(f"'{name}'" for name in EVENT_TYPES)
    op.execute(f"CREATE TYPE event_type AS ENUM ({names})")
    op.execute("CREATE CAST (text AS event_type) WITH INOUT AS ASSIGNMENT")
    op.execute("ALTER TABLE events ALTER COLUMN type TYPE event_type USING type::event_type")
    for definition in definitions:
        op.execute(definition)


def downgrade() -> None:
    definitions = _without_search_indexes()
    op.execute("ALTER TABLE events ALTER COLUMN type TYPE text USING type::text")
    op.execute("DROP CAST (text AS event_type)")
    op.execute("DROP TYPE event_type")
    for definition in definitions:
        op.execute(definition)
