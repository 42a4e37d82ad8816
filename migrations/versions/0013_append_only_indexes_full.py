"""The indexes whose keys only ever grow within a conversation fill their
pages: `fillfactor = 100` instead of B-tree's default 90.

A conversation's versions, seqs, role ordinals and a batch's sort keys only
grow (an `insert` between two messages is the exception, and rare), and the
feed's transaction ids grow across the whole database. PostgreSQL splits a
page that such an insert fills so that the left page keeps `fillfactor`
percent of it (the rightmost page, and since PostgreSQL 12 any page where
the inserts go up one after another), and leaves the rest free for inserts
that never come for these keys: a tenth of every page. At 100 the pages are
packed as an append-only log's should be; an insert that does land inside a
full page splits it, as any page split does.

Only pages split from now on are packed; existing ones stay as they are
until the index is rebuilt (`REINDEX INDEX CONCURRENTLY …`,
docs/operations.md). The migration rewrites nothing.

Create Date: 2026-11-24
"""

from __future__ import annotations

from migrations.steps import execute_all

revision: str = "0013_append_only_indexes_full"
down_revision: str | None = "0012_role_indexes"

APPEND_ONLY = (
    "pk_events",
    "ix_events_feed",
    "pk_messages",
    "ix_messages_batch",
    "uq_messages_role_system",
    "uq_messages_role_user",
    "uq_messages_role_assistant",
    "uq_messages_role_tool",
)


def upgrade() -> None:
    execute_all(f"ALTER INDEX {index} SET (fillfactor = 100)" for index in APPEND_ONLY)


def downgrade() -> None:
    execute_all(f"ALTER INDEX {index} RESET (fillfactor)" for index in APPEND_ONLY)
