"""The search indexes: an operator's choice, built and dropped while the
store runs (`convo search-index status|enable|disable`).

Search works without them: the statement then reads the content events of
the conversations it may return (by primary key when it names one). The
indexes make a tenant-wide search an index scan, and every append pays for
them inside its transaction (docs/search.md, "What an append pays for
search"):

- `text` (`ix_events_search_text`, words: `mode=text`, CJK as character
  bigrams and unigrams): built by migrations 0006 and 0018, so a new
  store searches fast at any size. A write-heavy store that rarely
  searches can drop it, and every append gets cheaper, bulk appends
  the most (docs/search.md, "What an append pays for search", has the
  figures).
- `substring` (`ix_events_search_substring`, five-character grams since
  migration 0020, `store.postgres.search_grams`: `mode=substring`): not
  built by the migrations since 0009 — it is the larger and costlier one.
  It needs no extension, so every server can build it.

Both changes are CONCURRENTLY (appends and reads go on meanwhile), so they
run on an autocommit connection and without a statement timeout. A build
that failed or was interrupted leaves an INVALID index, which `enable`
drops and builds again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import psycopg

from store.postgres.search_grams import GRAMS, grams_function, grams_query_function
from store.postgres.search_words import VECTOR

SearchIndexKind = Literal["text", "substring"]

# Partial on the events that carry content, over the derived text
# (`convo_search_text`, migrations 0006 and 0009; its words:
# `convo_search_vector`, 0018; its grams: `convo_search_grams`, 0020): the expressions
# `search.SEARCH_TEXT_MATCH` and `search.SEARCH_SUBSTRING_MATCH` spell.
_CONTENT_EVENTS = "WHERE type IN ('message_appended', 'message_edited')"
# A 64 kB pending list, not the server's 4 MB: migration 0010 says why.
PENDING_LIST = "WITH (gin_pending_list_limit = 64)"
INDEXES: dict[SearchIndexKind, tuple[str, str]] = {
    "text": (
        "ix_events_search_text",
        f"USING gin ({VECTOR}) {PENDING_LIST}",
    ),
    "substring": (
        "ix_events_search_substring",
        f"USING gin ({GRAMS}) {PENDING_LIST}",
    ),
}

STATE = (
    "SELECT i.indisvalid, pg_relation_size(i.indexrelid) FROM pg_index AS i"
    " WHERE i.indexrelid = to_regclass(%(name)s)"
)


@dataclass(frozen=True)
class SearchIndex:
    """One index as the server has it."""

    kind: SearchIndexKind
    name: str
    present: bool
    valid: bool  # a build that did not finish leaves an invalid index
    size_bytes: int


Connection = psycopg.Connection[Any]


def status(conn: Connection, kind: SearchIndexKind) -> SearchIndex:
    name = INDEXES[kind][0]
    row = conn.execute(STATE, {"name": name}).fetchone()
    if row is None:
        return SearchIndex(kind, name, present=False, valid=False, size_bytes=0)
    return SearchIndex(kind, name, True, bool(row[0]), int(row[1]))


def enable(conn: Connection, kind: SearchIndexKind) -> SearchIndex:
    """Build the index. Already there and valid: nothing to do."""
    current = status(conn, kind)
    if current.present and current.valid:
        return current
    conn.execute("SET statement_timeout = 0")
    if kind == "substring":
        install_grams(conn)
    if current.present:
        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {current.name}")
    conn.execute(create_statement(kind, concurrently=True))
    return status(conn, kind)


def install_grams(conn: Connection) -> None:
    """The grams' functions, as migration 0020 installs them: a database
    migrated down below 0020 (or restored from one) can still build the
    index the code searches with."""
    schema = conn.execute("SELECT quote_ident(current_schema())").fetchone()
    assert schema is not None
    conn.execute(grams_function(schema[0]))
    conn.execute(grams_query_function(schema[0]))


def create_statement(kind: SearchIndexKind, *, concurrently: bool = False) -> str:
    """The statement that builds the index (a bulk load builds it after
    the load, in its own transaction: not concurrently)."""
    name, method = INDEXES[kind]
    how = "CONCURRENTLY " if concurrently else ""
    return f"CREATE INDEX {how}{name} ON events {method} {_CONTENT_EVENTS}"


def disable(conn: Connection, kind: SearchIndexKind) -> SearchIndex:
    conn.execute("SET statement_timeout = 0")
    conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEXES[kind][0]}")
    return status(conn, kind)
