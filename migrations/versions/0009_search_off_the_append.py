"""Search costs an append less: the text is derived without a SQL call, and
the substring index is opt-in.

With both 0006 indexes an append took much longer than without them, and
the events' indexes grew by several times the message's own size while
the pending lists were young (measured: docs/search.md, "What an append
pays for search"). Two causes, two changes:

- `convo_search_text` was a SQL function with a FROM clause and STRICT,
  which PostgreSQL cannot inline: every insert into `events` ran it through
  the SQL-function executor once per index. It is now one
  expression (no FROM, not STRICT), which the planner inlines into the
  index expressions; the rare content array goes through
  `convo_search_parts`. Its results are the same for every input (NULL for
  a null, for no content, for content that is neither string nor array),
  so the index built by 0006 stays valid and is not rebuilt.
- The trigram index (`ix_events_search_substring`, substring search) was
  the bigger of the two, even when bulk-built, and a trigram posting per
  three characters on every append. It is dropped here
  and becomes an operator's choice: `convo search-index enable substring` builds
  it (CONCURRENTLY: appends go on meanwhile), `disable substring` drops it.
  Substring search works without it, reading the searched conversations'
  events (docs/search.md).

Create Date: 2026-11-23
"""

from __future__ import annotations

from types import ModuleType

from alembic import context, op

from migrations.steps import execute_all

revision: str = "0009_search_off_the_append"
down_revision: str | None = "0008_listing"

# The text parts of a content array, joined by newlines (the 0006 rule).
SEARCH_PARTS_FUNCTION = (
    "CREATE FUNCTION convo_search_parts(content json) RETURNS text"
    " LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$"
    " SELECT string_agg(p ->> 'text', E'\\n') FROM json_array_elements(content) AS p"
    " WHERE p ->> 'type' = 'text' $$"
)

# One expression, so it is inlined: the content is looked up where a
# message event keeps it (`message` for an append, top level for an edit).
# `convo_search_parts` is named with its schema: PostgreSQL 17 builds
# indexes with `search_path` set to `pg_catalog, pg_temp`, and a function
# with its own `SET search_path` would not be inlined.
_CONTENT = "coalesce(data -> 'message' -> 'content', data -> 'content')"


def search_text_function(schema: str) -> str:
    return (
        "CREATE OR REPLACE FUNCTION convo_search_text(data json) RETURNS text"
        " LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE AS $$"
        f" SELECT left(CASE json_typeof({_CONTENT})"
        " WHEN 'string' THEN coalesce(data -> 'message' ->> 'content', data ->> 'content')"
        f" WHEN 'array' THEN {schema}.convo_search_parts({_CONTENT}) END, 100000) $$"
    )


UPGRADE: list[str] = [
    SEARCH_PARTS_FUNCTION,
    "DROP INDEX IF EXISTS ix_events_search_substring",
]


def _search_0006() -> ModuleType:
    # 0006's statements, as alembic loaded that migration (its module name
    # starts with a digit: it cannot be imported by name).
    script = context.script.get_revision("0006_search")
    assert script is not None
    module: ModuleType = script.module
    return module


def upgrade() -> None:
    execute_all(UPGRADE)
    schema = op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one()
    op.execute(search_text_function(schema))


def downgrade() -> None:
    previous = _search_0006()
    op.execute(
        previous.SEARCH_TEXT_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    )
    op.execute("DROP FUNCTION IF EXISTS convo_search_parts(json)")
    op.execute("SET LOCAL statement_timeout = 0")
    # Unless an operator had already built it (`convo search-index enable substring`).
    op.execute(previous.SUBSTRING_INDEX.replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS"))
