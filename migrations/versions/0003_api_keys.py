"""API keys: one row per key, tenant-scoped; only the key's sha256 is stored.

Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from migrations.steps import optional, required

revision: str = "0003_api_keys"
down_revision: str | None = "0002_projections"

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        required("id", postgresql.UUID(as_uuid=True)),
        required("tenant", sa.Text()),
        required("name", sa.Text()),
        required("key_hash", sa.Text()),
        required("key_start", sa.Text()),
        required("created_at", TIMESTAMP, server_default=sa.text("now()")),
        optional("revoked_at", TIMESTAMP),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])


def downgrade() -> None:
    op.execute("DROP TABLE api_keys")
