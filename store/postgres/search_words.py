"""The words index's tokenising rule in SQL, built from its one home,
`store.domain.search_words`.

Two functions (installed by migration 0018, which keeps a copy of this
SQL as released; `tests/migrations` holds the two equal, so a change of
the rule needs a new migration):

- `convo_search_words(t text)`: `search_words.index_words` — CJK runs as
  bigrams and unigrams, CJK punctuation as spaces, in the first
  `REWRITTEN_CHARS` characters. Regular-expression replacements only,
  each linear in the text (taking the characters of a run one by one
  with `substr` would be quadratic); it runs only for text with CJK.
- `convo_search_vector(data json)`: the words of a content event,
  `to_tsvector('simple', …)` of its text, rewritten when it has CJK. One
  expression, inlined into the index (`ix_events_search_text`) and into
  the search's condition, which must spell it so (`search.SEARCH_TEXT_MATCH`).
  Functions it calls are named with their schema: PostgreSQL 17 builds
  indexes with `search_path` set to `pg_catalog, pg_temp`.
"""

from __future__ import annotations

from store.domain.search_words import (
    CJK_CHARACTERS,
    CJK_PUNCTUATION,
    NOT_CJK_CHARACTERS,
    REWRITE_TRIGGER,
    REWRITTEN_CHARS,
)

__all__ = ["VECTOR", "vector_function", "words_function"]

# What the words index is built on, and what a text search matches.
VECTOR = "convo_search_vector(data)"


def words_function(schema: str) -> str:
    # Within the head: punctuation to spaces; each run set apart by spaces;
    # its characters doubled (AABBCC), the first dropped (ABBCC) and the
    # rest paired (AB BC C): its bigrams then its last character. Then the
    # head's CJK characters one by one, then the text beyond the head.
    cjk, head = CJK_CHARACTERS, f"left(t, {REWRITTEN_CHARS})"
    spaced = (
        f"regexp_replace(regexp_replace({head}, '{CJK_PUNCTUATION}', ' ', 'g'),"
        f" '({cjk}+)', ' \\1 ', 'g')"
    )
    doubled = f"regexp_replace({spaced}, '({cjk})', '\\1\\1', 'g')"
    sequence = (
        f"regexp_replace(regexp_replace({doubled}, ' {cjk}', ' ', 'g'),"
        f" '({cjk})({cjk})', '\\1\\2 ', 'g')"
    )
    unigrams = (
        f"regexp_replace(regexp_replace({head}, '{NOT_CJK_CHARACTERS}+', '', 'g'),"
        " '(.)', '\\1 ', 'g')"
    )
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.convo_search_words(t text) RETURNS text"
        " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$"
        f" SELECT {sequence} || ' ' || {unigrams} || ' ' || substr(t, {REWRITTEN_CHARS + 1}) $$"
    )


def vector_function(schema: str) -> str:
    text = f"{schema}.convo_search_text(data)"
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.convo_search_vector(data json) RETURNS tsvector"
        " LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS $$"
        f" SELECT to_tsvector('simple'::regconfig, CASE WHEN {text} ~ '{REWRITE_TRIGGER}'"
        f" THEN {schema}.convo_search_words({text}) ELSE {text} END) $$"
    )
