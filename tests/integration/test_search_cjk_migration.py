"""Migration 0018 builds the words index again so that CJK is searchable:
messages written before it are found by their Chinese, Japanese and
Korean words after it; running it again changes nothing; an index an
operator dropped stays dropped; downgrading restores 0006's expression.
And the SQL rule it installs reads text as `search_words.index_words`
says."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from hosting.settings import Settings, libpq_url
from store.domain.messages import Message
from store.domain.search import search_query
from store.domain.search_words import index_words
from store.repository import Repository
from tests.integration.test_membership_migration import migrate_to, table_rows

BEFORE = "0017_api_key_expiry"
INDEX_DEFINITION = "SELECT pg_get_indexdef(to_regclass('ix_events_search_text'))"
INDEX_OID = "SELECT to_regclass('ix_events_search_text')::oid"


def _execute(url: str, statement: str) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(statement)


async def _found(repository: Repository, q: str, **fields: Any) -> list[int]:
    page = await repository.search_messages(search_query(q=q, **fields))
    return [hit.seq for hit in page.hits]


async def test_messages_written_before_0018_are_found_by_their_cjk_words(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    migrate_to(database_url, settings, BEFORE, down=True)
    assert "to_tsvector" in table_rows(database_url, settings, INDEX_DEFINITION)[0][0]
    # Written at 0017: the store's writes did not change.
    conversation = await repository.create_conversation()
    await repository.append_messages(
        conversation.id,
        [
            Message(role="user", content="请帮我修复解析器的测试"),
            Message(role="assistant", content="解析器のテストを直しました"),
            Message(role="user", content="검색을 고쳐 주세요, deploy"),
        ],
    )
    migrate_to(database_url, settings, "head")
    assert "convo_search_vector" in table_rows(database_url, settings, INDEX_DEFINITION)[0][0]
    assert await _found(repository, "测试") == [1]
    assert await _found(repository, "解析器") == [2, 1]
    assert await _found(repository, "テスト") == [2]
    assert await _found(repository, "검색") == [3]
    assert await _found(repository, "deploy") == [3]
    assert await _found(repository, "析", mode="substring") == [2, 1]

    # Again: the functions replace themselves, the index is not rebuilt.
    oid = table_rows(database_url, settings, INDEX_OID)
    released = importlib.import_module("migrations.versions.0018_search_reads_cjk")
    rebuild = released._rebuild_unless(released.NEW_INDEX, "convo_search_vector")
    _execute(database_url, rebuild)
    assert table_rows(database_url, settings, INDEX_OID) == oid

    migrate_to(database_url, settings, BEFORE, down=True)
    assert "to_tsvector" in table_rows(database_url, settings, INDEX_DEFINITION)[0][0]
    functions = "SELECT count(*) FROM pg_proc WHERE proname LIKE 'convo_search_%'"
    assert table_rows(database_url, settings, functions) == [(2,)]  # text, parts
    migrate_to(database_url, settings, "head")
    assert await _found(repository, "修复") == [1]


async def test_an_index_the_operator_dropped_stays_dropped(
    repository: Repository, database_url: str, settings: Settings
) -> None:
    migrate_to(database_url, settings, BEFORE, down=True)
    _execute(database_url, "DROP INDEX ix_events_search_text")
    migrate_to(database_url, settings, "head")
    assert table_rows(database_url, settings, INDEX_DEFINITION) == [(None,)]
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [Message(role="user", content="测试通过")])
    # Without the index the words are still found, by reading the events.
    assert await _found(repository, "测试") == [1]


async def test_a_long_cjk_message_is_appended_and_found(repository: Repository) -> None:
    # 30,000 distinct-ish characters: rewritten whole, their words would
    # not fit a tsvector; the first 10,000 are read as bigrams, the rest
    # by the parser alone, and the append does not fail.
    text = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(30_000)) + " tailword"
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [Message(role="user", content=text)])
    assert await _found(repository, text[100:102]) == [1]
    assert await _found(repository, text[5000:5004]) == [1]
    assert await _found(repository, "tailword") == [1]


@pytest.fixture
def connection(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        yield conn


_CHARS = st.sampled_from(
    list("请帮我修复解析器的测试") + list("のテストー한국어") + list("ab Z9 ，。「」・“”-.'\\:&|")
)


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(_CHARS, min_size=1, max_size=30))
def test_the_sql_rule_reads_text_as_the_python_rule(
    connection: psycopg.Connection[Any], text: str
) -> None:
    row = connection.execute(
        "SELECT convo_search_vector(json_build_object('content', %(t)s::text)),"
        " to_tsvector('simple'::regconfig, %(words)s::text)",
        {"t": text, "words": index_words(text)},
    ).fetchone()
    assert row is not None
    assert row[0] == row[1], text
