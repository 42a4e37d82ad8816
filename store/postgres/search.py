"""Search on PostgreSQL: one statement per page (`page_statement`), over
the words index of migrations 0006 and 0018 (CJK as bigrams and unigrams:
`store.postgres.search_words`) and, where an operator built it, the
substring index (five-character grams: `store.postgres.search_grams`,
`store.postgres.search_indexes`; docs/search.md)."""

from __future__ import annotations

from functools import cache
from typing import Any

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
    text_snippet,
)
from store.domain.search_words import REWRITE_TRIGGER, has_cjk
from store.postgres.pooled import Pooled
from store.postgres.search_grams import GRAMS_MATCH

# A message's searchable text is derived from its event, never stored:
# `convo_search_text(data)` (migrations 0006, 0009), its words
# `convo_search_vector(data)` (0018) and its grams `convo_search_grams`
# (0020) are the expressions the GIN indexes are built on (words always;
# substring where an operator built it), partial on the events that carry
# content; a search must spell them exactly so, to use them.
_CONTENT_EVENTS = "e.type IN ('message_appended', 'message_edited')"
SEARCH_TEXT_MATCH = (
    "convo_search_vector(e.data) @@ websearch_to_tsquery('simple'::regconfig, %(words)s)"
)
# The grams find the candidates, `ILIKE` keeps the hits. Without the
# substring index the planner runs the cheaper `ILIKE` first (the grams'
# function is declared costly), over the content events of the
# conversations the search may return, and the grams only for its hits.
SEARCH_SUBSTRING_MATCH = f"{GRAMS_MATCH} AND convo_search_text(e.data) ILIKE %(pattern)s"
# The CJK words a text query requires as typed (`WordsQuery.runs`).
SEARCH_RUNS_MATCH = "convo_search_text(e.data) LIKE ALL (%(runs)s)"
# Text with CJK gets its snippet cut here (`text_snippet`): ts_headline's
# parser would see a whole CJK sentence as one word.
_HAS_CJK = f"convo_search_text(h.data) ~ '{REWRITE_TRIGGER}'"

# Each filter, applied to the hits the index found (`a` is the message's
# own appended event: its recorded time).
SEARCH_FILTERS = {
    "conversation": "c.key = %(conversation)s",
    "role": "m.role = %(role)s",
    "agent": "m.agent_id = %(agent)s",
    "kind": "m.kind = %(kind)s",
    "batch": "m.batch = %(batch)s",
    "tool": "EXISTS (SELECT 1 FROM tool_calls AS t WHERE t.conversation_id = m.conversation_id"
    " AND t.tool_name = %(tool)s AND (t.call_id = m.tool_call_id OR t.assistant_seq = m.seq))",
    "from": "a.recorded_at >= %(from)s",
    "to": "a.recorded_at < %(to)s",
    "metadata": "c.metadata @> %(metadata)s",
    "after": "(a.recorded_at, m.conversation_id, m.seq) < (%(at)s, %(after_cid)s, %(after_seq)s)",
}
# The filters on the conversation, applied with the tenant (`c`).
_CONVERSATION_FILTERS = frozenset({"conversation", "metadata"})


@cache
def page_statement(
    *, substring: bool, words: bool, runs: bool, cjk: bool, filters: tuple[str, ...]
) -> str:
    """One page of a search: the index finds the events whose text matches,
    the tenant's are kept (the candidates); each is kept if its text holds
    the CJK words as typed (`runs`), it holds its message's current text
    (the appended event of an unedited message, the latest edit of an
    edited one), and the filters hold; newest first.

    The candidates are a subquery the planner may not merge (`OFFSET 0`):
    its estimate of a CJK phrase's bigrams ANDed is a few rows where there
    are thousands, and it then looked up every tenant's candidates'
    messages and appended events before dropping three in four; the
    check as typed, which takes each text out of its JSON again, would
    also run on all of them.

    A substring of CJK characters only is a words search (`words`): its
    unigram, its bigram, or its bigrams ANDed and the characters as typed
    (`runs`, as for the CJK words a text query requires): exact, and
    better answered than by the substring index.

    The snippet is made for the page's rows only: ts_headline for text (its
    marks are control characters, removed from the text first), the text
    itself for a substring match, for text with CJK and for every hit of
    a query with CJK (`cjk`), cut by the caller; a flag says which.
    One statement shape per mode and set of filters, each prepared once.
    """
    match = SEARCH_TEXT_MATCH if words else SEARCH_SUBSTRING_MATCH
    checks = f" AND {SEARCH_RUNS_MATCH}" if words and runs else ""
    of_conversation = "".join(
        f" AND {SEARCH_FILTERS[name]}" for name in filters if name in _CONVERSATION_FILTERS
    )
    conditions = "".join(
        f" AND {SEARCH_FILTERS[name]}" for name in filters if name not in _CONVERSATION_FILTERS
    )
    candidates = (
        "SELECT e.conversation_id, e.version, e.data, c.key FROM events AS e"
        " JOIN conversations AS c ON c.id = e.conversation_id"
        f" WHERE {_CONTENT_EVENTS} AND {match}"
        f" AND c.tenant = %(tenant)s AND c.deleted_at IS NULL{of_conversation} OFFSET 0"
    )
    page = (
        "SELECT m.conversation_id, e.key, m.seq, m.role, m.agent_id, m.kind, m.batch,"
        " a.recorded_at, m.edit_version IS NOT NULL AS edited, e.data"
        f" FROM ({candidates}) AS e"
        " JOIN messages AS m"
        " ON m.conversation_id = e.conversation_id AND m.seq = (e.data ->> 'seq')::bigint"
        " JOIN events AS a ON a.conversation_id = m.conversation_id AND a.version = m.event_version"
        f" WHERE e.version = coalesce(m.edit_version, m.event_version){checks}{conditions}"
        " ORDER BY a.recorded_at DESC, m.conversation_id DESC, m.seq DESC LIMIT %(limit)s"
    )
    if substring or cjk:
        snippet = "true, convo_search_text(h.data)"
    else:
        snippet = (
            f"{_HAS_CJK}, CASE WHEN {_HAS_CJK} THEN convo_search_text(h.data) ELSE"
            " ts_headline('simple'::regconfig,"
            " translate(convo_search_text(h.data), E'\\x02\\x03', ''),"
            " websearch_to_tsquery('simple'::regconfig, %(words)s), %(headline)s) END"
        )
    # Hits name the conversation by the client's id (`key`); the cursor
    # keeps the storage's uuid, which orders the hits.
    return (
        "SELECT h.conversation_id, h.key, h.seq, h.role, h.agent_id, h.kind,"
        f" h.batch, h.recorded_at, h.edited, {snippet} FROM ({page}) AS h"
        " ORDER BY h.recorded_at DESC, h.conversation_id DESC, h.seq DESC"
    )


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
    words = query.indexed_as_words
    cjk = has_cjk(query.q)
    runs = False
    if words:
        mapped = query.words
        params["words"] = mapped.words
        if mapped.runs:
            runs = True
            params["runs"] = [like_pattern(run) for run in mapped.runs]
    else:
        params["pattern"] = like_pattern(query.needle)
        params["needle"] = query.needle
    if not (substring or cjk):
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
    shape = page_statement(
        substring=substring, words=words, runs=runs, cjk=cjk, filters=tuple(filters)
    )
    return shape, params


def _hits_page(query: SearchQuery, rows: list[Any]) -> SearchPage:
    """The page of hits from the statement's rows (one more than the page
    holds: whether another page follows)."""
    hits = []
    for cid, shown_id, seq, role, agent, kind, batch, at, edited, raw, text in rows[: query.limit]:
        if query.mode == "substring":
            passage, highlights = substring_snippet(text or "", query.needle)
        elif raw:
            passage, highlights = text_snippet(text or "", query.q)
        else:
            passage, highlights = marked_snippet(text or "")
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


class MessageSearch(Pooled):
    """The storage port's search (`storage.PostgresStorage`)."""

    async def search_messages(self, tenant: str, query: SearchQuery) -> SearchPage:
        text, params = statement(tenant, query)
        return _hits_page(query, await self._analyst_rows(text, params))
