"""Text search reads Chinese, Japanese and Korean: the words index is built
on `convo_search_vector(data)`, whose words split CJK runs into character
bigrams and unigrams (store.domain.search_words says how and why).

Two functions:

- `convo_search_words(t text)`: the text as the word parser should read
  it when it has CJK — each CJK run as its overlapping bigrams then its
  last character (one word a character position), CJK and full-width
  punctuation as spaces, and every run's characters once more, in the
  first 10,000 characters; the rest as it is. Regular-expression
  replacements only, each linear in the text;
- `convo_search_vector(data json)`: `to_tsvector('simple', …)` of the
  event's text (`convo_search_text`, 0006/0009), through
  `convo_search_words` only when the text has CJK: text without it gets
  the same words as before. One expression, inlined into the index.

`ix_events_search_text` is built again on the new expression, with the
64 kB pending list of 0010; a database whose operator dropped it
(`convo search-index disable text`) keeps it dropped, and
`convo search-index enable text` builds the new one. Running the upgrade
again changes nothing (the functions are replaced by themselves and the
index is rebuilt only while it is on the old expression).

This SQL is the rule as released here; `store.postgres.search_words`
builds the same from the code's rule, and `tests/migrations` holds the two
equal: a change of the rule is a new migration.

Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

from migrations.steps import current_schema

revision: str = "0018_search_reads_cjk"
down_revision: str | None = "0017_api_key_expiry"

# The characters of a CJK run (Han, kana, Hangul letters), and the
# punctuation that splits runs; text is rewritten when it has either (the
# general punctuation, U+2010-205E, excepted: English text uses it).
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc"
    "\U00020000-\U0003134f"
)
_GENERAL_PUNCTUATION = "\u2010-\u205e"
_CJK_PUNCTUATION = (
    "\u3000-\u3004\u3008-\u303f\u30a0\u30fb\ufe10-\ufe19"
    "\ufe30-\ufe4f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
)
_PUNCTUATION = f"[{_GENERAL_PUNCTUATION}{_CJK_PUNCTUATION}]"
_TRIGGER = f"[{_CJK}{_CJK_PUNCTUATION}]"

_NOT_CJK = f"[^{_CJK}]"
_HEAD_CHARS = 10000  # only the first characters are rewritten
_HEAD = f"left(t, {_HEAD_CHARS})"
_SPACED = (
    f"regexp_replace(regexp_replace({_HEAD}, '{_PUNCTUATION}', ' ', 'g'),"
    f" '([{_CJK}]+)', ' \\1 ', 'g')"
)
_DOUBLED = f"regexp_replace({_SPACED}, '([{_CJK}])', '\\1\\1', 'g')"
_SEQUENCE = (
    f"regexp_replace(regexp_replace({_DOUBLED}, ' [{_CJK}]', ' ', 'g'),"
    f" '([{_CJK}])([{_CJK}])', '\\1\\2 ', 'g')"
)
_UNIGRAMS = f"regexp_replace(regexp_replace({_HEAD}, '{_NOT_CJK}+', '', 'g'), '(.)', '\\1 ', 'g')"

WORDS_FUNCTION = (
    "CREATE OR REPLACE FUNCTION {schema}.convo_search_words(t text) RETURNS text"
    " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$"
    f" SELECT {_SEQUENCE} || ' ' || {_UNIGRAMS} || ' ' || substr(t, {_HEAD_CHARS + 1}) $$"
)

_TEXT = "{schema}.convo_search_text(data)"
VECTOR_FUNCTION = (
    "CREATE OR REPLACE FUNCTION {schema}.convo_search_vector(data json) RETURNS tsvector"
    " LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS $$"
    f" SELECT to_tsvector('simple'::regconfig, CASE WHEN {_TEXT} ~ '{_TRIGGER}'"
    f" THEN {{schema}}.convo_search_words({_TEXT}) ELSE {_TEXT} END) $$"
)
_CONTENT_EVENTS = "WHERE type IN ('message_appended', 'message_edited')"
_PENDING_LIST = "WITH (gin_pending_list_limit = 64)"
NEW_INDEX = (
    "CREATE INDEX ix_events_search_text ON events USING gin (convo_search_vector(data))"
    f" {_PENDING_LIST} {_CONTENT_EVENTS}"
)
OLD_INDEX = (
    "CREATE INDEX ix_events_search_text ON events"
    " USING gin (to_tsvector('simple'::regconfig, convo_search_text(data)))"
    f" {_PENDING_LIST} {_CONTENT_EVENTS}"
)


def _rebuild_unless(create: str, uses: str) -> str:
    """Build the words index again with `create`, if it exists and its
    definition does not already name `uses`."""
    return (
        "DO $do$ BEGIN"
        " IF to_regclass('ix_events_search_text') IS NOT NULL AND position("
        f"'{uses}' IN pg_get_indexdef(to_regclass('ix_events_search_text'))) = 0 THEN"
        f" DROP INDEX ix_events_search_text; {create};"
        " END IF; END $do$"
    )


def upgrade() -> None:
    schema = current_schema()
    op.execute(WORDS_FUNCTION.replace("{schema}", schema))
    op.execute(VECTOR_FUNCTION.replace("{schema}", schema))
    # Building the index reads every content event: no statement timeout for it.
    op.execute("SET LOCAL statement_timeout = 0")
    op.execute(_rebuild_unless(NEW_INDEX, "convo_search_vector"))


def downgrade() -> None:
    op.execute("SET LOCAL statement_timeout = 0")
    op.execute(_rebuild_unless(OLD_INDEX, "to_tsvector"))
    op.execute("DROP FUNCTION IF EXISTS convo_search_vector(json)")
    op.execute("DROP FUNCTION IF EXISTS convo_search_words(text)")
