"""Projections: messages, per-role index (LIST partitions), batches and
their members, tool calls, agent profiles, context slots.

Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_projections"
down_revision: str | None = "0001_event_log"

ROLES = ("system", "user", "assistant", "tool")
UUID = postgresql.UUID(as_uuid=True)
JSONB = postgresql.JSONB(astext_type=sa.Text())
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "conversation_heads",
        sa.Column("conversation_id", UUID, nullable=False),
        sa.Column("tenant", sa.Text(), nullable=False),
        sa.Column("next_seq", sa.BigInteger(), nullable=False),
        sa.Column("current_batch", sa.Integer(), nullable=False),
        sa.Column("archived", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("metadata", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_conversation_heads"),
    )
    op.create_table(
        "messages",
        sa.Column("conversation_id", UUID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("sort_key", sa.Numeric(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("role_ordinal", sa.BigInteger(), nullable=False),
        sa.Column("body", JSONB, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("tool_names", JSONB, server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("is_error", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("client_message_id", sa.Text(), nullable=True),
        sa.Column("token_estimate", sa.Integer(), nullable=False),
        sa.Column("recorded_at", TIMESTAMP, nullable=False),
        sa.Column("edited_at", TIMESTAMP, nullable=True),
        sa.Column("event_version", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "role IN ('system', 'user', 'assistant', 'tool')", name="ck_messages_role_known"
        ),
        sa.PrimaryKeyConstraint("conversation_id", "seq", name="pk_messages"),
    )
    op.create_index(
        "uq_messages_sort_key", "messages", ["conversation_id", "sort_key"], unique=True
    )
    op.create_index(
        "ix_messages_conversation_id_agent_id_seq",
        "messages",
        ["conversation_id", "agent_id", "seq"],
    )
    op.create_index(
        "uq_messages_client_message_id",
        "messages",
        ["conversation_id", "client_message_id"],
        unique=True,
        postgresql_where=sa.text("client_message_id IS NOT NULL"),
    )
    op.create_index("ix_messages_role_recorded_at", "messages", ["role", "recorded_at"])

    # One table per role: LIST partitions of one parent. Every unique key
    # includes the partition key (role), as PostgreSQL requires.
    op.execute(
        "CREATE TABLE message_role_index ("
        " conversation_id uuid NOT NULL,"
        " role text NOT NULL,"
        " ordinal bigint NOT NULL,"
        " seq bigint NOT NULL,"
        " batch integer NOT NULL,"
        " agent_id text NOT NULL,"
        " CONSTRAINT pk_message_role_index PRIMARY KEY (conversation_id, role, ordinal)"
        ") PARTITION BY LIST (role)"
    )
    for role in ROLES:
        op.execute(
            f"CREATE TABLE message_role_index_{role} PARTITION OF message_role_index"
            f" FOR VALUES IN ('{role}')"
        )

    op.create_table(
        "batches",
        sa.Column("conversation_id", UUID, nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("boundary", sa.Numeric(), nullable=False),
        sa.Column("summary_seq", sa.BigInteger(), nullable=True),
        sa.Column("retained", JSONB, server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("operation", sa.Text(), nullable=False),
        sa.Column("parameters", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("event_version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "batch", name="pk_batches"),
    )
    op.create_table(
        "batch_members",
        sa.Column("conversation_id", UUID, nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.Column("sort_key", sa.Numeric(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "batch", "sort_key", name="pk_batch_members"),
    )
    op.create_index(
        "ix_batch_members_role", "batch_members", ["conversation_id", "batch", "role", "sort_key"]
    )
    op.create_table(
        "tool_calls",
        sa.Column("conversation_id", UUID, nullable=False),
        sa.Column("call_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("arguments", JSONB, nullable=False),
        sa.Column("assistant_seq", sa.BigInteger(), nullable=False),
        sa.Column("result_seq", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("is_error", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.CheckConstraint("status IN ('pending', 'complete')", name="ck_tool_calls_status_known"),
        sa.PrimaryKeyConstraint("conversation_id", "call_id", name="pk_tool_calls"),
    )
    op.create_index(
        "ix_tool_calls_pending",
        "tool_calls",
        ["conversation_id", "assistant_seq"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index("ix_tool_calls_tool_name", "tool_calls", ["tool_name"])
    op.create_table(
        "agent_profiles",
        sa.Column("conversation_id", UUID, nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("is_sub_agent", sa.Boolean(), nullable=False),
        sa.Column("system_prompt", sa.Text(), nullable=True),
        sa.Column("role_definition", sa.Text(), nullable=True),
        sa.Column("event_version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "agent_id", name="pk_agent_profiles"),
    )
    op.create_table(
        "context_slots",
        sa.Column("conversation_id", UUID, nullable=False),
        sa.Column("agent_id", sa.Text(), nullable=False),
        sa.Column("slot", sa.Text(), nullable=False),
        sa.Column("value", JSONB, nullable=False),
        sa.Column("event_version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "agent_id", "slot", name="pk_context_slots"),
    )


def downgrade() -> None:
    for table in (
        "context_slots",
        "agent_profiles",
        "tool_calls",
        "batch_members",
        "batches",
        "message_role_index",  # drops its partitions with it
        "messages",
        "conversation_heads",
    ):
        op.execute(f"DROP TABLE {table}")
