"""The event log: conversation streams, events, idempotent append requests.

Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_event_log"
down_revision: str | None = None


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("tenant", sa.Text(), server_default=sa.text("'default'"), nullable=False),
        sa.Column("version", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "metadata",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.CheckConstraint("version >= 0", name="ck_conversations_version_not_negative"),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    op.create_index("ix_conversations_tenant_updated_at", "conversations", ["tenant", "updated_at"])
    op.create_table(
        "events",
        sa.Column("position", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("conversation_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "metadata",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("client_id", sa.Text(), nullable=True),
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "transaction_id",
            sa.BigInteger(),
            server_default=sa.text("(pg_current_xact_id()::text)::bigint"),
            nullable=False,
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
        sa.Column("conversation_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("request_hash", sa.Text(), nullable=False),
        sa.Column("first_version", sa.BigInteger(), nullable=False),
        sa.Column("last_version", sa.BigInteger(), nullable=False),
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
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
