"""Listing conversations: filters and keyset order.

Revision ID: 0008_listing
Revises: 0007_agent_windows
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008_listing"
down_revision: str | None = "0007_agent_windows"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Listing pages by (created_at, id) within a tenant: ties by id are part of
# the index, so a page is one index range. Metadata containment (`@>`) uses
# a GIN index; jsonb_path_ops is smaller and faster than the default opclass
# and supports exactly `@>`. Appends never change `metadata` or `created_at`,
# so neither index costs them their HOT updates. `updated_at` stays
# unindexed on purpose: every append sets it (store.domain.listing).
UPGRADE: list[str] = [
    "CREATE INDEX ix_conversations_tenant_created_at_id ON conversations (tenant, created_at, id)",
    "DROP INDEX ix_conversations_tenant_created_at",
    "CREATE INDEX ix_conversations_metadata ON conversations USING gin (metadata jsonb_path_ops)",
]

DOWNGRADE: list[str] = [
    "DROP INDEX ix_conversations_metadata",
    "CREATE INDEX ix_conversations_tenant_created_at ON conversations (tenant, created_at)",
    "DROP INDEX ix_conversations_tenant_created_at_id",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
