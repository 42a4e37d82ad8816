"""Every search is an index scan: EXPLAIN the statements the PostgreSQL
storage sends, over tens of thousands of messages in many conversations
(bench.search's corpus, bulk-loaded with COPY, then ANALYZEd), and check
that no node reads `events`, `messages` or `tool_calls` sequentially, and
that the search indexes (or the events' primary key) find the rows. The
substring index is an operator's choice (store.postgres.search_indexes):
built here."""

from __future__ import annotations

import json

import psycopg
import pytest

from bench.search import MID_JANUARY, Corpus, conversation_key, load_corpus, tenant_of
from hosting.settings import Settings, libpq_url
from store.domain.search import SearchQuery, search_query
from store.postgres import search_indexes
from store.postgres.search import statement
from tests.integration.plans import plan_nodes

pytestmark = pytest.mark.integration

CONVERSATIONS = 40
PER_CONVERSATION = 750  # 30,000 messages
BIG_TABLES = {"events", "messages", "tool_calls"}


def _forms(corpus: Corpus) -> dict[str, SearchQuery]:
    rare, mid, common = corpus.searched_words()
    return {
        "text": search_query(q=mid),
        "text, rare": search_query(q=rare),
        "text, common word": search_query(q=common),
        "text, phrase": search_query(q=f'"{common} {mid}"'),
        "substring": search_query(q=rare[1:] if len(rare) >= 4 else rare, mode="substring"),
        "substring, Chinese": search_query(q=corpus.chinese_word(200), mode="substring"),
        "substring, Chinese (2 characters)": search_query(
            q=corpus.chinese_word(200, 2), mode="substring"
        ),
        "text, Chinese (2 characters)": search_query(q=corpus.chinese_word(200, 2)),
        "text, Chinese (1 character)": search_query(q=corpus.chinese_word(200, 2)[0]),
        "text, Japanese": search_query(q=corpus.japanese_word(200)),
        "text, Chinese and English": search_query(q=f"{corpus.chinese_word(20, 2)} {mid}"),
        "text + role + kind + agent": search_query(
            q=mid, role="user", kind="input", agent_id="main"
        ),
        "text + time range": search_query(q=mid, **MID_JANUARY),
        "text + conversation": search_query(q=mid, conversation_id=conversation_key(4)),
        "text + metadata": search_query(q=mid, metadata={"project": "p4"}),
        "text + tool": search_query(q=mid, tool_name="grep"),
        "text + batch": search_query(q=mid, batch=1),
        "substring + role": search_query(q=mid[:4], mode="substring", role="assistant"),
        "text, next page": search_query(
            q=mid,
            cursor="WyIyMDI2LTAxLTE1VDAwOjAwOjAwKzAwOjAwIiwiMDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwIiw1XQ",
        ),
    }


@pytest.fixture
def loaded(database_url: str, settings: Settings) -> str:
    load_corpus(
        database_url, settings, conversations=CONVERSATIONS, per_conversation=PER_CONVERSATION
    )
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        search_indexes.enable(conn, "substring")
    return database_url


def test_every_search_form_is_an_index_scan(loaded: str) -> None:
    corpus = Corpus(7)
    with psycopg.connect(libpq_url(loaded)) as conn:
        conn.execute("ANALYZE")
        for name, query in _forms(corpus).items():
            text, params = statement(tenant_of(0), query)
            (row,) = conn.execute(f"EXPLAIN (FORMAT JSON) {text}", params).fetchall()
            nodes = list(plan_nodes(row[0][0]["Plan"]))
            shown = json.dumps(row[0][0]["Plan"])[:4000]
            sequential = [
                n["Relation Name"]
                for n in nodes
                if n["Node Type"] == "Seq Scan" and n.get("Relation Name") in BIG_TABLES
            ]
            assert sequential == [], f"{name}: sequential scan of {sequential}\n{shown}"
            indexes = {n.get("Index Name") for n in nodes}
            # A substring of CJK characters only is found by its words.
            expected = {"ix_events_search_text"} if query.indexed_as_words else set()
            if query.mode == "substring":
                expected.add("ix_events_search_substring")
            assert expected & indexes or "pk_events" in indexes, f"{name}: {shown}"


def test_the_corpus_is_found(loaded: str) -> None:
    """The statements find what the corpus holds (and what the plans were for)."""
    corpus = Corpus(7)
    forms = [
        "text",
        "text + role + kind + agent",
        "substring, Chinese",
        "substring, Chinese (2 characters)",
        "text, Chinese (2 characters)",
        "text, Japanese",
    ]
    with psycopg.connect(libpq_url(loaded)) as conn:
        for name in forms:
            text, params = statement(tenant_of(0), _forms(corpus)[name])
            assert conn.execute(text, params).fetchall(), name
