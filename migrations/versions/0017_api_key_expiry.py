"""API keys may expire: `expires_at` (null: never). A key past it is refused
like a revoked one, and streams opened with it end (api.revocation).

Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017_api_key_expiry"
down_revision: str | None = "0016_messages_packed"


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("api_keys", "expires_at")
