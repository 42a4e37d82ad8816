"""A carried member points at its message's event: `batch_carried` gains
the message's `agent_id`, `event_version` and `edit_version`.

A compacted window is mostly carried members (the tail and the retained
messages a batch operation carried over). To build its payload, each was
looked up twice by key: its message's row, for whose it is and where its
event is, then the event. With the three columns beside the member the
payload build looks up only the event: the carried part of a compacted
window's read costs about half what it did (docs/storage.md, "Batch
membership"). `agent_id` and `event_version` never change; `edit_version`
follows `messages.edit_version`.

Two triggers keep the copy equal to the message whatever release writes:
- an edit (`messages.edit_version` changed) sets `edit_version` on the
  message's carried rows, in every batch (`ix_batch_carried_seq` finds
  them). In the database rather than beside the edit's statement, so that
  an edit by a release from before this migration, still running during a
  deploy (`store.postgres.schema_revision` accepts a newer schema), keeps
  them equal too;
- a member inserted without them (by such a release) takes them from its
  message. This release's batch operations write them
  (`write_statements.COPY_MEMBERS`), so the trigger's condition is all
  they pay.

Upgrading fills the columns from each member's message; downgrading drops
them and the triggers. Nothing is moved out of the log either way.

Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

from migrations.steps import current_schema

revision: str = "0021_carried_point_at_events"
down_revision: str | None = "0020_search_substring_grams"


# The tables named by schema: a trigger runs under whatever search_path the
# writing session has (a restore or a replication worker sets its own).
FOLLOW_EDITS = (
    "CREATE FUNCTION convo_carried_follow_edit() RETURNS trigger LANGUAGE plpgsql AS $$"
    " BEGIN"
    " UPDATE {schema}.batch_carried SET edit_version = NEW.edit_version"
    " WHERE conversation_id = NEW.conversation_id AND seq = NEW.seq;"
    " RETURN NULL;"
    " END $$"
)
FILL_MEMBER = (
    "CREATE FUNCTION convo_carried_fill() RETURNS trigger LANGUAGE plpgsql AS $$"
    " BEGIN"
    " SELECT m.agent_id, m.event_version, m.edit_version"
    " INTO NEW.agent_id, NEW.event_version, NEW.edit_version"
    " FROM {schema}.messages AS m"
    " WHERE m.conversation_id = NEW.conversation_id AND m.seq = NEW.seq;"
    " RETURN NEW;"
    " END $$"
)


def upgrade() -> None:
    op.execute(
        "ALTER TABLE batch_carried ADD COLUMN agent_id text,"
        " ADD COLUMN event_version bigint, ADD COLUMN edit_version bigint"
    )
    op.execute(
        "UPDATE batch_carried AS b SET agent_id = m.agent_id,"
        " event_version = m.event_version, edit_version = m.edit_version"
        " FROM messages AS m WHERE m.conversation_id = b.conversation_id AND m.seq = b.seq"
    )
    op.execute(
        "ALTER TABLE batch_carried ALTER COLUMN agent_id SET NOT NULL,"
        " ALTER COLUMN event_version SET NOT NULL"
    )
    op.execute("CREATE INDEX ix_batch_carried_seq ON batch_carried (conversation_id, seq)")
    schema = current_schema()
    op.execute(FOLLOW_EDITS.replace("{schema}", schema))
    op.execute(
        "CREATE TRIGGER tg_messages_edit_carried AFTER UPDATE OF edit_version ON messages"
        " FOR EACH ROW WHEN (NEW.edit_version IS DISTINCT FROM OLD.edit_version)"
        " EXECUTE FUNCTION convo_carried_follow_edit()"
    )
    op.execute(FILL_MEMBER.replace("{schema}", schema))
    op.execute(
        "CREATE TRIGGER tg_batch_carried_fill BEFORE INSERT ON batch_carried"
        " FOR EACH ROW WHEN (NEW.event_version IS NULL)"
        " EXECUTE FUNCTION convo_carried_fill()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER tg_batch_carried_fill ON batch_carried")
    op.execute("DROP FUNCTION convo_carried_fill()")
    op.execute("DROP TRIGGER tg_messages_edit_carried ON messages")
    op.execute("DROP FUNCTION convo_carried_follow_edit()")
    op.execute("DROP INDEX ix_batch_carried_seq")
    op.execute(
        "ALTER TABLE batch_carried DROP COLUMN agent_id, DROP COLUMN event_version,"
        " DROP COLUMN edit_version"
    )
