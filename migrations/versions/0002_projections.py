"""Projections: messages, per-role index (LIST partitions), batches and
their members, tool calls, agent profiles, context slots.

Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from migrations.steps import execute_all, optional, required, role_partitions

revision: str = "0002_projections"
down_revision: str | None = "0001_event_log"

ROLES = ("system", "user", "assistant", "tool")
UUID = postgresql.UUID(as_uuid=True)
JSONB = postgresql.JSONB(astext_type=sa.Text())
TIMESTAMP = sa.DateTime(timezone=True)
TEXT = sa.Text()
BIGINT = sa.BigInteger()
INTEGER = sa.Integer()
NUMERIC = sa.Numeric()
BOOLEAN = sa.Boolean()


def upgrade() -> None:
    op.create_table(
        "conversation_heads",
        required("conversation_id", UUID),
        required("tenant", TEXT),
        required("next_seq", BIGINT),
        required("current_batch", INTEGER),
        required("archived", BOOLEAN, server_default=sa.text("false")),
        required("started_at", TIMESTAMP),
        required("metadata", JSONB, server_default=sa.text("'{}'::jsonb")),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_conversation_heads"),
    )
    op.create_table(
        "messages",
        required("conversation_id", UUID),
        required("seq", BIGINT),
        required("sort_key", NUMERIC),
        required("role", TEXT),
        required("agent_id", TEXT),
        required("kind", TEXT),
        required("batch", INTEGER),
        required("role_ordinal", BIGINT),
        required("body", JSONB),
        required("text", TEXT),
        optional("tool_call_id", TEXT),
        required("tool_names", JSONB, server_default=sa.text("'[]'::jsonb")),
        required("is_error", BOOLEAN, server_default=sa.text("false")),
        optional("client_message_id", TEXT),
        required("token_estimate", INTEGER),
        required("recorded_at", TIMESTAMP),
        optional("edited_at", TIMESTAMP),
        required("event_version", BIGINT),
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
    execute_all(role_partitions(ROLES))

    op.create_table(
        "batches",
        required("conversation_id", UUID),
        required("batch", INTEGER),
        required("boundary", NUMERIC),
        optional("summary_seq", BIGINT),
        required("retained", JSONB, server_default=sa.text("'[]'::jsonb")),
        required("operation", TEXT),
        required("parameters", JSONB, server_default=sa.text("'{}'::jsonb")),
        required("started_at", TIMESTAMP),
        required("event_version", BIGINT),
        sa.PrimaryKeyConstraint("conversation_id", "batch", name="pk_batches"),
    )
    op.create_table(
        "batch_members",
        required("conversation_id", UUID),
        required("batch", INTEGER),
        required("sort_key", NUMERIC),
        required("seq", BIGINT),
        required("role", TEXT),
        required("agent_id", TEXT),
        sa.PrimaryKeyConstraint("conversation_id", "batch", "sort_key", name="pk_batch_members"),
    )
    op.create_index(
        "ix_batch_members_role", "batch_members", ["conversation_id", "batch", "role", "sort_key"]
    )
    op.create_table(
        "tool_calls",
        required("conversation_id", UUID),
        required("call_id", TEXT),
        required("agent_id", TEXT),
        required("tool_name", TEXT),
        required("arguments", JSONB),
        required("assistant_seq", BIGINT),
        optional("result_seq", BIGINT),
        required("status", TEXT),
        required("is_error", BOOLEAN, server_default=sa.text("false")),
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
        required("conversation_id", UUID),
        required("agent_id", TEXT),
        required("is_sub_agent", BOOLEAN),
        optional("system_prompt", TEXT),
        optional("role_definition", TEXT),
        required("event_version", BIGINT),
        sa.PrimaryKeyConstraint("conversation_id", "agent_id", name="pk_agent_profiles"),
    )
    op.create_table(
        "context_slots",
        required("conversation_id", UUID),
        required("agent_id", TEXT),
        required("slot", TEXT),
        required("value", JSONB),
        required("event_version", BIGINT),
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
