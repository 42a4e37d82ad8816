"""The substring index: an operator's choice, built and dropped while the
store runs (`convo substring-index enable|disable|status`).

Substring search (`mode=substring`: characters anywhere, e.g. Chinese) works
without it: the statement reads the events of the conversations it
searches. On a store with many messages, tenant-wide substring search then
takes seconds; this GIN trigram index (pg_trgm) makes it an index scan.
Every append pays for it (a trigram entry per three characters, ~0.1 ms and
~340 bytes a message), which is why it is not built by the migrations
(migration 0009; docs/search.md, "What an append pays for search").

Both changes are CONCURRENTLY: appends and reads go on while the index is
built, so they run outside a transaction and without a statement timeout.
A build that fails (or is interrupted) leaves an INVALID index, which
`enable` drops and builds again.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from store.errors import InvalidOperation

INDEX = "ix_events_search_substring"

HAS_TRIGRAM = "SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'"
STATUS = (
    "SELECT i.indisvalid, pg_relation_size(i.indexrelid) FROM pg_index AS i"
    f" WHERE i.indexrelid = to_regclass('{INDEX}')"
)
CREATE = (
    f"CREATE INDEX CONCURRENTLY {INDEX} ON events"
    " USING gin (convo_search_text(data) gin_trgm_ops)"
    " WHERE type IN ('message_appended', 'message_edited')"
)
DROP = f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}"

NO_TRIGRAM = (
    "this PostgreSQL server has no pg_trgm extension (the embedded server ships"
    " without it): the substring index cannot be built here; substring search"
    " still works, reading the conversations' events (docs/search.md)"
)


@dataclass(frozen=True)
class SubstringIndex:
    """What the server has: whether it could build the index, and the index."""

    available: bool  # pg_trgm can be installed on this server
    present: bool
    valid: bool  # a build that did not finish leaves an invalid index
    size_bytes: int


def status(conn: psycopg.Connection[tuple[object, ...]]) -> SubstringIndex:
    available = conn.execute(HAS_TRIGRAM).fetchone() is not None
    row = conn.execute(STATUS).fetchone()
    if row is None:
        return SubstringIndex(available, present=False, valid=False, size_bytes=0)
    valid, size = row
    return SubstringIndex(available, present=True, valid=bool(valid), size_bytes=int(str(size)))


def enable(conn: psycopg.Connection[tuple[object, ...]]) -> SubstringIndex:
    """Build the index (an autocommit connection: CONCURRENTLY cannot run in
    a transaction). Already there and valid: nothing to do."""
    current = status(conn)
    if current.present and current.valid:
        return current
    if not current.available:
        raise InvalidOperation(NO_TRIGRAM)
    conn.execute("SET statement_timeout = 0")
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    if current.present:
        conn.execute(DROP)
    conn.execute(CREATE)
    return status(conn)


def disable(conn: psycopg.Connection[tuple[object, ...]]) -> SubstringIndex:
    conn.execute("SET statement_timeout = 0")
    conn.execute(DROP)
    return status(conn)
