"""API keys have a scope: `read_write` (every key so far) or `read_only`,
refused (403) on every route that writes (api.deps).

Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0019_api_key_scope"
down_revision: str | None = "0018_search_reads_cjk"


def upgrade() -> None:
    op.add_column(
        "api_keys",
        sa.Column("scope", sa.Text(), nullable=False, server_default=sa.text("'read_write'")),
    )
    op.create_check_constraint(
        "ck_api_keys_scope", "api_keys", "scope IN ('read_write', 'read_only')"
    )


def downgrade() -> None:
    op.drop_constraint("ck_api_keys_scope", "api_keys", type_="check")
    op.drop_column("api_keys", "scope")
