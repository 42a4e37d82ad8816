"""Substring search finds its candidates by five-character grams, not
trigrams: `convo_search_grams(t)` and `convo_search_grams_query(needle)`.

The trigram index (pg_trgm, `ix_events_search_substring`) finds every
event holding the needle's trigrams anywhere, in any order: for part of a
word, about 99 rows in 100 it finds do not hold the needle, and each is
read and its text taken out of the event's JSON again before `ILIKE`
drops it (docs/search.md, "Substring search"). Grams of five characters
name the needle itself, so the index finds nearly only hits; they are a
tsvector of bare lexemes, so no extension is needed and the embedded
server builds the index too.

The substring index stays an operator's choice (0009): one that was built
on trigrams is built again on grams, under this migration's lock (an
operator who prefers to build it while appends go on disables it first,
migrates, then `convo search-index enable substring`: CONCURRENTLY);
a database without it stays without it. Running the upgrade again changes
nothing. The downgrade builds the trigram index again where the grams one
was and pg_trgm is installed, else leaves it dropped.

This SQL is the rule as released here; `store.postgres.search_grams`
builds the same from the code, and `tests/unit` holds the two equal: a
change of the rule is a new migration.

Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

from migrations.steps import current_schema

revision: str = "0020_search_substring_grams"
down_revision: str | None = "0019_api_key_scope"

GRAMS_FUNCTION = (
    "CREATE OR REPLACE FUNCTION {schema}.convo_search_grams(t text) RETURNS tsvector"
    " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 1000 AS $$"
    " SELECT array_to_tsvector(ARRAY(SELECT g[1]"
    " FROM generate_series(1, 5) AS o,"
    " regexp_matches(substr(lower(left(t, 20000)), o), '.{1,5}', 'g') AS g)"
    " || CASE WHEN length(t) > 20000 THEN ARRAY['convo long text']"
    " ELSE ARRAY[]::text[] END) $$"
)
GRAMS_QUERY_FUNCTION = (
    "CREATE OR REPLACE FUNCTION {schema}.convo_search_grams_query(needle text)"
    " RETURNS tsquery LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$"
    " SELECT (CASE WHEN length(n) < 5"
    " THEN '''' || replace(replace(n, '\\', '\\\\'), '''', '''''') || '''' || ':*'"
    " ELSE '(' || (SELECT string_agg("
    "'''' || replace(replace(substr(n, i, 5), '\\', '\\\\'), '''', '''''') || '''', ' & ')"
    " FROM generate_series(1, length(n) - 4) AS i) || ')' END"
    " || ' | ''convo long text''')::tsquery FROM lower(needle) AS n $$"
)

_CONTENT_EVENTS = "WHERE type IN ('message_appended', 'message_edited')"
_PENDING_LIST = "WITH (gin_pending_list_limit = 64)"
GRAMS_INDEX = (
    "CREATE INDEX ix_events_search_substring ON events"
    " USING gin (convo_search_grams(convo_search_text(data)))"
    f" {_PENDING_LIST} {_CONTENT_EVENTS}"
)
TRIGRAM_INDEX = (
    "CREATE INDEX ix_events_search_substring ON events"
    f" USING gin (convo_search_text(data) gin_trgm_ops) {_PENDING_LIST} {_CONTENT_EVENTS}"
)
_DEFINITION = "pg_get_indexdef(to_regclass('ix_events_search_substring'))"


def upgrade() -> None:
    schema = current_schema()
    op.execute(GRAMS_FUNCTION.replace("{schema}", schema))
    op.execute(GRAMS_QUERY_FUNCTION.replace("{schema}", schema))
    # Building the index reads every content event: no statement timeout for it.
    op.execute("SET LOCAL statement_timeout = 0")
    op.execute(
        "DO $do$ BEGIN"
        " IF to_regclass('ix_events_search_substring') IS NOT NULL"
        f" AND position('convo_search_grams' IN {_DEFINITION}) = 0 THEN"
        f" DROP INDEX ix_events_search_substring; {GRAMS_INDEX};"
        " END IF; END $do$"
    )


def downgrade() -> None:
    op.execute("SET LOCAL statement_timeout = 0")
    op.execute(
        "DO $do$ BEGIN"
        " IF to_regclass('ix_events_search_substring') IS NOT NULL"
        f" AND position('convo_search_grams' IN {_DEFINITION}) > 0 THEN"
        " DROP INDEX ix_events_search_substring;"
        " IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN"
        f" {TRIGRAM_INDEX}; END IF;"
        " END IF; END $do$"
    )
    op.execute("DROP FUNCTION IF EXISTS convo_search_grams_query(text)")
    op.execute("DROP FUNCTION IF EXISTS convo_search_grams(text)")
