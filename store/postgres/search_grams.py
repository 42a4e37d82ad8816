"""The substring index's keys: a message's text as its overlapping
five-character grams (migration 0020; docs/search.md, "Substring search").

A trigram index finds every row holding the needle's trigrams anywhere,
in any order; in text made of common letter groups nearly all of them do
not hold the needle, and each is read and its text taken out of the
event's JSON again to drop it. Grams of five characters name the needle
itself (a needle of five characters is one gram), so the rows the index
finds are nearly all hits.

Two functions (installed by migration 0020, which keeps a copy of this SQL
as released; `tests/unit` holds the two equal, so a change of the rule
needs a new migration):

- `convo_search_grams(t text)`: the grams of `lower(t)`, one starting at
  each character (the last four shorter: the text's ends), as a tsvector
  of bare lexemes (`array_to_tsvector`: no parser, any character); of the
  first `INDEXED_CHARS` characters, so the tsvector stays far below its
  1 MB limit. A longer text also gets `LONG_TEXT`, which every query
  names: it is always a candidate, and the `ILIKE` after the index
  decides.
- `convo_search_grams_query(needle text)`: what a text holding `needle`
  must have: every gram of `lower(needle)` (ANDed), or, for a needle
  shorter than a gram, a gram it starts (a prefix); or `LONG_TEXT`.

Both lower the text with the server's `lower`, as `ILIKE` does, so every
text `ILIKE` keeps is a row the index finds. The grams are taken with
regular expressions (five passes of `.{1,5}`, one from each offset),
each linear in the text.
"""

from __future__ import annotations

__all__ = [
    "GRAMS",
    "GRAMS_MATCH",
    "INDEXED_CHARS",
    "grams_function",
    "grams_query_function",
]

GRAM = 5
INDEXED_CHARS = 20_000
# Longer than a gram, so no gram is ever equal to it.
LONG_TEXT = "convo long text"

# What the substring index is built on, and what a substring search matches.
GRAMS = "convo_search_grams(convo_search_text(data))"
GRAMS_MATCH = (
    "convo_search_grams(convo_search_text(e.data)) @@ convo_search_grams_query(%(needle)s)"
)


def _quoted(value: str) -> str:
    """SQL for `value` as a quoted tsquery lexeme (backslash and quote escaped)."""
    return f"'''' || replace(replace({value}, '\\', '\\\\'), '''', '''''') || ''''"


def grams_function(schema: str) -> str:
    head = f"lower(left(t, {INDEXED_CHARS}))"
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.convo_search_grams(t text) RETURNS tsvector"
        " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 1000 AS $$"
        " SELECT array_to_tsvector(ARRAY(SELECT g[1]"
        f" FROM generate_series(1, {GRAM}) AS o,"
        f" regexp_matches(substr({head}, o), '.{{1,{GRAM}}}', 'g') AS g)"
        f" || CASE WHEN length(t) > {INDEXED_CHARS} THEN ARRAY['{LONG_TEXT}']"
        " ELSE ARRAY[]::text[] END) $$"
    )


def grams_query_function(schema: str) -> str:
    gram = _quoted(f"substr(n, i, {GRAM})")
    return (
        f"CREATE OR REPLACE FUNCTION {schema}.convo_search_grams_query(needle text)"
        " RETURNS tsquery LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$"
        f" SELECT (CASE WHEN length(n) < {GRAM} THEN {_quoted('n')} || ':*'"
        f" ELSE '(' || (SELECT string_agg({gram}, ' & ')"
        f" FROM generate_series(1, length(n) - {GRAM - 1}) AS i) || ')' END"
        f" || ' | ''{LONG_TEXT}''')::tsquery FROM lower(needle) AS n $$"
    )
