"""The search indexes keep a short pending list: 64 kB instead of the
server's default 4 MB (`gin_pending_list_limit`).

A GIN index with `fastupdate` (the default) adds each new row's entries to
an unsorted pending list and merges the list into the index proper when it
outgrows the limit (or at VACUUM). With 4 MB, the list of a store written
one message at a time held thousands of messages' entries, uncompressed,
and its pages stayed allocated after each merge: measured after 5,000
single appends, the words index had grown 939 bytes a message — more than
the message's event itself. With 64 kB it grew 161 (bulk-built it is
~154), and the median single append took 0.83 ms against 0.80; a
100-message append 10.1 ms against 9.0, since its entries no longer fit one
list and are merged in the same call (bench/write_path.py; docs/search.md,
"What an append pays for search"). Turning `fastupdate` off saved 20
bytes more and cost +40% per append.

Only storage parameters change: no index is rebuilt, and an index an
operator dropped (`convo search-index disable`) stays dropped.

Revision ID: 0010_search_pending_list
Revises: 0009_search_off_the_append
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010_search_pending_list"
down_revision: str | None = "0009_search_off_the_append"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = ("ix_events_search_text", "ix_events_search_substring")
PENDING_LIST_KB = 64  # store.postgres.search_indexes builds them with the same


def upgrade() -> None:
    for name in INDEXES:
        op.execute(f"ALTER INDEX IF EXISTS {name} SET (gin_pending_list_limit = {PENDING_LIST_KB})")


def downgrade() -> None:
    for name in INDEXES:
        op.execute(f"ALTER INDEX IF EXISTS {name} RESET (gin_pending_list_limit)")
