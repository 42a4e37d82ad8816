"""The event log: conversation streams, events, idempotent append requests.

Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from migrations.steps import optional, required

revision: str = "0001_event_log"
down_revision: str | None = None


def upgrade() -> None:
    op.create_table(
        "conversations",
        required("id", postgresql.UUID(as_uuid=True)),
        required("tenant", sa.Text(), server_default=sa.text("'default'")),
        required("version", sa.BigInteger(), server_default=sa.text("0")),
        required("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()")),
        required("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()")),
        optional("archived_at", sa.DateTime(timezone=True)),
        optional("deleted_at", sa.DateTime(timezone=True)),
        required(
            "metadata",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
        ),
        sa.CheckConstraint("version >= 0", name="ck_conversations_version_not_negative"),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    op.create_index("ix_conversations_tenant_updated_at", "conversations", ["tenant", "updated_at"])
    op.create_table(
        "events",
        required("position", sa.BigInteger(), sa.Identity(always=True)),
        required("conversation_id", postgresql.UUID(as_uuid=True)),
        required("version", sa.BigInteger()),
        required("type", sa.Text()),
        required("data", postgresql.JSONB(astext_type=sa.Text())),
        required(
            "metadata",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
        ),
        optional("client_id", sa.Text()),
        required("recorded_at", sa.DateTime(timezone=True), server_default=sa.text("now()")),
        required(
            "transaction_id",
            sa.BigInteger(),
            server_default=sa.text("(pg_current_xact_id()::text)::bigint"),
        ),
        sa.CheckConstraint("version >= 1", name="ck_events_version_positive"),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_events_conversation_id_conversations",
        ),
        sa.PrimaryKeyConstraint("position", name="pk_events"),
        sa.UniqueConstraint("conversation_id", "version", name="uq_events_stream_version"),
        sa.UniqueConstraint("conversation_id", "client_id", name="uq_events_client_id"),
    )
    op.create_index("ix_events_feed", "events", ["transaction_id", "position"])
    op.create_table(
        "append_requests",
        required("conversation_id", postgresql.UUID(as_uuid=True)),
        required("idempotency_key", sa.Text()),
        required("request_hash", sa.Text()),
        required("first_version", sa.BigInteger()),
        required("last_version", sa.BigInteger()),
        required("recorded_at", sa.DateTime(timezone=True), server_default=sa.text("now()")),
        sa.PrimaryKeyConstraint("conversation_id", "idempotency_key", name="pk_append_requests"),
    )
    # The log is append-only: vacuum it for visibility (index-only scans of
    # the feed index) rather than for dead rows, which it rarely has.
    op.execute(
        "ALTER TABLE events SET (autovacuum_vacuum_insert_scale_factor = 0.05,"
        " autovacuum_analyze_scale_factor = 0.02)"
    )


def downgrade() -> None:
    op.drop_table("append_requests")
    op.drop_index("ix_events_feed", table_name="events")
    op.drop_table("events")
    op.drop_index("ix_conversations_tenant_updated_at", table_name="conversations")
    op.drop_table("conversations")
