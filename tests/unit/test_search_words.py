"""The CJK tokenising rule (store.domain.search_words): what the words
index holds, what a query asks it, and where a hit is highlighted."""

from __future__ import annotations

import importlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.domain.errors import InvalidOperation
from store.domain.search import search_query, text_match, text_snippet
from store.domain.search_words import (
    REWRITTEN_CHARS,
    WordsQuery,
    has_cjk,
    highlight_spans,
    index_words,
    map_query,
)
from store.postgres.search_words import vector_function, words_function

_WORD = re.compile(r"\w+")

# Chinese, Japanese kana, Korean, Latin, digits, spaces and punctuation.
_CHARS = st.sampled_from(
    list("请帮我修复解析器的测试北京") + list("のテスト한국어") + list("abc XY1 ，。「」・-.")
)
texts = st.text(_CHARS, min_size=1, max_size=40)


def index_tokens(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(index_words(text))}


def query_tokens(q: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(map_query(q).words)}


@given(texts, st.data())
def test_every_short_cjk_substring_is_in_the_index(text: str, data: st.DataObject) -> None:
    runs = re.findall(r"[请帮我修复解析器的测试北京のテスト한국어]+", text)
    if not runs:
        return
    run = data.draw(st.sampled_from(runs))
    start = data.draw(st.integers(0, len(run) - 1))
    for length in (1, 2):
        needle = run[start : start + length]
        assert query_tokens(needle) <= index_tokens(text), (text, needle)
        assert text_match(text, needle) is not None


@given(texts)
def test_text_without_cjk_is_read_as_before(text: str) -> None:
    plain = re.sub(r"[^\x00-\x7f]", "", text)
    assert index_words(plain) == plain
    assert map_query(plain).words == plain


def test_runs_become_bigrams_then_their_last_character_and_unigrams() -> None:
    words = index_words("请修复解析器，parser。")
    assert words.split() == [
        "请修",
        "修复",
        "复解",
        "解析",
        "析器",
        "器",
        "parser",
        *"请修复解析器",
    ]
    assert index_words("한국어 テスト・ok").split() == [
        *["한국", "국어", "어", "テス", "スト", "ト", "ok"],
        *"한국어テスト",
    ]


@pytest.mark.parametrize(
    ("q", "mapped", "runs"),
    [
        ("测", "测", ()),
        ("测试", "测试", ()),
        ("解析器", "解析 析器", ("解析器",)),
        ('"解析器"', '"解析 析器"', ()),
        ("修复 parser", "修复 parser", ()),
        ("修复parser", '"修复 复 parser"', ()),
        ('"修复 parser"', '"修复 复 parser"', ()),
        ("解析器のテスト", "解析 析器 器の のテ テス スト", ("解析器のテスト",)),
        ("-测试 deploy", "-测试 deploy", ()),
        ("-解析器 deploy", '-"解析 析器" deploy', ()),
        ("测试 OR 解析", "测试 OR 解析", ()),
        ("解析器 or 测试", '"解析 析器" or 测试', ()),
        ("「测试」", "测试", ()),
        ("deploy failed", "deploy failed", ()),
    ],
)
def test_queries_map_to_the_indexed_words(q: str, mapped: str, runs: tuple[str, ...]) -> None:
    assert map_query(q) == WordsQuery(mapped, runs)


@pytest.mark.parametrize(
    ("text", "q", "found"),
    [
        ("请帮我修复解析器的测试", "解析器", True),
        ("请帮我修复解析器的测试", "测试", True),
        ("请帮我修复解析器的测试", "修", True),
        ("请帮我修复解析器的测试", "解器", False),
        ("请帮我修复parser的测试", "修复 parser", True),
        ("请帮我修复parser的测试", "修复parser", True),
        ("请帮我修复 the parser", '"修复 parser"', False),
        ("解析器のテストが失敗した", "解析器のテスト", True),
        ("解析器のテストが失敗した", "テスト", True),
        ("한국어 검색을 고쳐 주세요", "검색", True),
        ("한국어 검색을 고쳐 주세요", "검색 -한국어", False),
        ("deploy 的测试", "deploy", True),
    ],
)
def test_in_memory_text_mode_reads_cjk(text: str, q: str, found: bool) -> None:
    assert (text_match(text, q) is not None) is found


def test_highlights_fall_on_the_characters_of_a_chinese_hit() -> None:
    snippet, spans = text_snippet("请帮我修复解析器的测试", "解析器 测试")
    assert snippet == "请帮我修复解析器的测试"
    assert spans == [(5, 8), (9, 11)]
    assert [snippet[s:e] for s, e in spans] == ["解析器", "测试"]


def test_highlights_of_a_mixed_hit_take_whole_latin_words() -> None:
    text = "请修复parser的测试, not the parsers"
    assert [text[s:e] for s, e in highlight_spans(text, "修复 parser -测试")] == [
        "修复",
        "parser",
    ]
    assert highlight_spans("日本語のテスト", "のテ") == [(3, 5)]


def test_only_the_head_of_a_long_text_is_rewritten() -> None:
    text = "测试" * (REWRITTEN_CHARS // 2) + "解析器 tail"
    words = index_words(text).split()
    assert words[-2:] == ["解析器", "tail"]  # beyond the head: the parser's words
    assert "测试" in words
    assert "解析" not in words


def test_has_cjk_sees_letters_and_full_width_punctuation_not_english_quotes() -> None:
    assert all(has_cjk(text) for text in ("テスト", "a，b", "한"))
    assert not has_cjk("“quoted” — text…")


@pytest.mark.parametrize(("q", "words"), [("测试", "测试"), ("测", "测"), ("テスト", "テス スト")])
def test_substring_mode_finds_cjk_of_any_length_by_its_words(q: str, words: str) -> None:
    query = search_query(q=q, mode="substring")
    assert query.indexed_as_words
    assert query.words.words == words


def test_substring_mode_refuses_two_latin_characters_naming_the_way_out() -> None:
    with pytest.raises(InvalidOperation) as refused:
        search_query(q="ab", mode="substring")
    message = str(refused.value)
    assert "at least 3 characters" in message
    assert "Chinese, Japanese or Korean" in message
    assert "mode=text" in message
    assert not search_query(q="abc", mode="substring").indexed_as_words


def test_migration_0018_installs_the_codes_rule() -> None:
    # The rule's one home is store.domain.search_words; 0018 keeps its SQL
    # as released. Changing the rule needs a migration that installs it.
    released = importlib.import_module("migrations.versions.0018_search_reads_cjk")
    assert words_function("{schema}") == released.WORDS_FUNCTION
    assert vector_function("{schema}") == released.VECTOR_FUNCTION
