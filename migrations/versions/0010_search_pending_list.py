"""The search indexes keep a short pending list: 64 kB instead of the
server's default 4 MB (`gin_pending_list_limit`).

A GIN index with `fastupdate` (the default) adds each new row's entries to
an unsorted pending list and merges the list into the index proper when it
outgrows the limit (or at VACUUM). With 4 MB, the list of a store written
one message at a time held thousands of messages' entries, uncompressed,
and its pages stayed allocated after each merge: the words index grew
more than the message's event itself. With 64 kB it grows about as much
as when bulk-built, for a slightly slower append (a 100-message append's
entries no longer fit one list and are merged in the same call); turning
`fastupdate` off saved little more space and made every append slower.
The figures: docs/search.md, "What an append pays for search".

Only storage parameters change: no index is rebuilt, and an index an
operator dropped (`convo search-index disable`) stays dropped.

Create Date: 2026-11-23
"""

from __future__ import annotations

from migrations.steps import execute_all

revision: str = "0010_search_pending_list"
down_revision: str | None = "0009_search_off_the_append"

INDEXES = ("ix_events_search_text", "ix_events_search_substring")
PENDING_LIST_KB = 64  # store.postgres.search_indexes builds them with the same


def upgrade() -> None:
    execute_all(
        f"ALTER INDEX IF EXISTS {name} SET (gin_pending_list_limit = {PENDING_LIST_KB})"
        for name in INDEXES
    )


def downgrade() -> None:
    execute_all(f"ALTER INDEX IF EXISTS {name} RESET (gin_pending_list_limit)" for name in INDEXES)
