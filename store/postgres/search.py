"""Search on PostgreSQL: one statement per page (`sql.search`), over the
words index of migration 0006 and, where an operator built it, the
substring index (`store.postgres.search_indexes`; docs/search.md)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from store.domain.search import (
    START_MARK,
    STOP_MARK,
    Cursor,
    SearchHit,
    SearchPage,
    SearchQuery,
    like_pattern,
    marked_snippet,
    substring_snippet,
)
from store.postgres import sql

# ts_headline's options: the two best fragments of up to 30 words, each
# match between control characters (removed from the text beforehand).
HEADLINE_OPTIONS = (
    f'StartSel="{START_MARK}", StopSel="{STOP_MARK}", MaxWords=30, MinWords=12,'
    ' ShortWord=0, MaxFragments=2, FragmentDelimiter=" … "'
)


def statement(tenant: str, query: SearchQuery) -> tuple[str, dict[str, Any]]:
    """The page's statement and its parameters (one more row than the page
    holds: whether another page follows)."""
    params: dict[str, Any] = {"tenant": tenant, "limit": query.limit + 1}
    filters: list[str] = []

    def add(name: str, **values: Any) -> None:
        filters.append(name)
        params.update(values)

    substring = query.mode == "substring"
    if substring:
        params["pattern"] = like_pattern(query.needle)
    else:
        params["q"] = query.q
        params["headline"] = HEADLINE_OPTIONS
    if query.conversation_id is not None:
        add("conversation", conversation=query.conversation_id)
    if query.role is not None:
        add("role", role=query.role)
    if query.agent_id is not None:
        add("agent", agent=query.agent_id)
    if query.kind is not None:
        add("kind", kind=query.kind.value)
    if query.batch is not None:
        add("batch", batch=query.batch)
    if query.tool_name is not None:
        add("tool", tool=query.tool_name)
    if query.recorded_from is not None:
        add("from", **{"from": query.recorded_from})
    if query.recorded_to is not None:
        add("to", to=query.recorded_to)
    if query.metadata is not None:
        add("metadata", metadata=Jsonb(query.metadata))
    after = query.after()
    if after is not None:
        add("after", at=after.recorded_at, after_cid=after.conversation, after_seq=after.seq)
    return sql.search(substring=substring, filters=tuple(filters)), params


async def search_messages(
    conn: AsyncConnection[Any], tenant: str, query: SearchQuery
) -> SearchPage:
    text, params = statement(tenant, query)
    cursor = await conn.execute(text, params)
    rows = await cursor.fetchall()
    hits = []
    for cid, shown_id, seq, role, agent, kind, batch, at, edited, snippet in rows[: query.limit]:
        if query.mode == "substring":
            passage, highlights = substring_snippet(snippet or "", query.needle)
        else:
            passage, highlights = marked_snippet(snippet or "")
        hits.append(
            (
                Cursor(recorded_at=at, conversation=cid, seq=seq),
                SearchHit(
                    conversation_id=shown_id,
                    seq=seq,
                    role=role,
                    agent_id=agent,
                    kind=kind,
                    batch=batch,
                    recorded_at=at,
                    edited=edited,
                    snippet=passage,
                    highlights=highlights,
                ),
            )
        )
    more = len(rows) > query.limit
    return SearchPage(
        hits=[hit for _, hit in hits],
        next_cursor=hits[-1][0].encode() if more and hits else None,
    )
