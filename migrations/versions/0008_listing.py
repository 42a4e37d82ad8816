"""Listing conversations: filters and keyset order.

Create Date: 2026-11-23
"""

from __future__ import annotations

from migrations.steps import statement_steps

revision: str = "0008_listing"
down_revision: str | None = "0007_agent_windows"

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

upgrade, downgrade = statement_steps(UPGRADE, DOWNGRADE)
