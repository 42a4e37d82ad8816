"""The words index's tokenising rule in SQL, built from its one home,
`store.domain.search_words`.

Two functions (installed by migration 0018, which keeps a copy of this
SQL as released; `tests/migrations` holds the two equal, so a change of
the rule needs a new migration):

- `convo_search_words(t text)`: `search_words.index_words` — CJK runs as
  bigrams and unigrams, CJK punctuation as spaces. A SQL function with a
  FROM clause, so never inlined: it runs only for text with CJK.
- `convo_search_vector(data json)`: the words of a content event,
  `to_tsvector('simple', …)` of its text, rewritten when it has CJK. One
  expression, inlined into the index (`ix_events_search_text`) and into
  the search's condition, which must spell it so (`search.SEARCH_TEXT_MATCH`).
  Functions it calls are named with their schema: PostgreSQL 17 builds
  indexes with `search_path` set to `pg_catalog, pg_temp`.
"""

from __future__ import annotations

from store.domain.search_words import CJK_PUNCTUATION, PIECES, REWRITE_TRIGGER

__all__ = ["VECTOR", "vector_function", "words_function"]

# What the words index is built on, and what a text search matches.
VECTOR = "convo_search_vector(data)"


def words_function(schema: str) -> str:
    # Each run: its bigrams then its last character (one word a position);
    # every run's characters once more at the end; other text with its
    # CJK punctuation made spaces.
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.convo_search_words(t text) RETURNS text"
        " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$"
        " SELECT string_agg(CASE"
        f" WHEN p[1] IS NULL THEN regexp_replace(p[2], '{CJK_PUNCTUATION}', ' ', 'g')"
        " WHEN length(p[1]) = 1 THEN p[1]"
        " ELSE (SELECT string_agg(substr(p[1], i, 2), ' ' ORDER BY i)"
        " FROM generate_series(1, length(p[1]) - 1) AS i) || ' ' || right(p[1], 1)"
        " END, ' ' ORDER BY n) || ' ' || coalesce(string_agg("
        "regexp_replace(p[1], '(.)', ' \\1', 'g'), ' ' ORDER BY n), '')"
        f" FROM regexp_matches(t, '{PIECES}', 'g') WITH ORDINALITY AS m(p, n) $$"
    )


def vector_function(schema: str) -> str:
    text = f"{schema}.convo_search_text(data)"
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.convo_search_vector(data json) RETURNS tsvector"
        " LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS $$"
        f" SELECT to_tsvector('simple'::regconfig, CASE WHEN {text} ~ '{REWRITE_TRIGGER}'"
        f" THEN {schema}.convo_search_words({text}) ELSE {text} END) $$"
    )
