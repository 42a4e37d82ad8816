"""Conversation ids users choose (unique per tenant).

A conversation is addressed by the id its creator chose; the storage keeps
a uuid derived from the tenant and that id (`store.domain.conversation_keys`), and
the id itself in `conversations.key`. Existing conversations keep their
UUID as their id: their rows are re-keyed to the derived uuid, in every
table that names a conversation.

Create Date: 2026-11-23
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision: str = "0005_conversation_keys"
down_revision: str | None = "0004_text_stored_once"

# A copy of store.domain.conversation_keys' namespace: a migration must not change
# when the code does.
_NAMESPACE = uuid.UUID("0b7e3c52-61a4-4f0e-9d3a-5c8e2f14a9b7")

# Every table whose rows name a conversation, besides `conversations`.
_TABLES = (
    "events",
    "append_requests",
    "messages",
    "message_role_index",
    "batches",
    "batch_members",
    "tool_calls",
    "agent_profiles",
    "context_slots",
)


def _rekey(pairs: list[tuple[uuid.UUID, uuid.UUID]]) -> None:
    """Move every row from its old conversation uuid to its new one."""
    if not pairs:
        return
    op.execute("CREATE TEMPORARY TABLE stream_rekey (old uuid PRIMARY KEY, new uuid NOT NULL)")
    op.get_bind().execute(
        sa.text("INSERT INTO stream_rekey (old, new) VALUES (:old, :new)"),
        [{"old": old, "new": new} for old, new in pairs],
    )
    for table in (*_TABLES, "conversations"):
        column = "id" if table == "conversations" else "conversation_id"
        op.execute(
            f"UPDATE {table} AS t SET {column} = r.new FROM stream_rekey AS r"
            f" WHERE t.{column} = r.old"
        )
    op.execute("DROP TABLE stream_rekey")


def upgrade() -> None:
    op.execute("ALTER TABLE conversations ADD COLUMN key text")
    op.execute("UPDATE conversations SET key = id::text")
    rows = op.get_bind().execute(sa.text("SELECT id, tenant FROM conversations")).all()
    _rekey([(id_, uuid.uuid5(_NAMESPACE, f"{tenant}\x00{id_}")) for id_, tenant in rows])
    op.execute("ALTER TABLE conversations ALTER COLUMN key SET NOT NULL")


def downgrade() -> None:
    # Conversations whose id is a UUID get it back as their uuid; the others
    # (ids the earlier schema could not express) keep the derived one.
    rows = op.get_bind().execute(sa.text("SELECT id, key FROM conversations")).all()
    pairs = []
    for id_, key in rows:
        try:
            pairs.append((id_, uuid.UUID(key)))
        except ValueError:
            continue
    _rekey(pairs)
    op.execute("ALTER TABLE conversations DROP COLUMN key")
