"""The substring index's grams on PostgreSQL (store.postgres.search_grams):
every text that `ILIKE` keeps is one the grams find, so a search through
the index misses nothing a scan would have found."""

from __future__ import annotations

import random

import psycopg
import pytest

from hosting.settings import libpq_url
from store.domain.search import like_pattern
from store.postgres.search_grams import INDEXED_CHARS

pytestmark = pytest.mark.integration

# Latin of both cases, digits, CJK, characters whose case changes their
# bytes, and what tsquery and LIKE would read as syntax.
_ALPHABET = list("abcAB01 解析器のテ") + list("İßΣσçÇ") + list("'\\:*&|!()%_-\n")

FINDS = (
    "SELECT t ILIKE p, convo_search_grams(t) @@ convo_search_grams_query(n)"
    " FROM unnest(%(texts)s::text[], %(needles)s::text[], %(patterns)s::text[]) AS x(t, n, p)"
)


def _cases(rng: random.Random, count: int) -> list[tuple[str, str]]:
    cases = []
    for _ in range(count):
        text = "".join(rng.choices(_ALPHABET, k=rng.randint(0, 40)))
        if text and rng.random() < 0.7:  # a part of the text, its case changed at times
            start = rng.randrange(len(text))
            needle = text[start : start + rng.randint(3, 12)]
            needle = needle.upper() if rng.random() < 0.3 else needle
        else:
            needle = "".join(rng.choices(_ALPHABET, k=rng.randint(3, 8)))
        if len(needle) >= 3:
            cases.append((text, needle))
    return cases


def _found(url: str, cases: list[tuple[str, str]]) -> list[tuple[bool, bool]]:
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(
            FINDS,
            {
                "texts": [t for t, _ in cases],
                "needles": [n for _, n in cases],
                "patterns": [like_pattern(n) for _, n in cases],
            },
        ).fetchall()
    return [(bool(a), bool(b)) for a, b in rows]


def test_every_text_ilike_keeps_is_found_by_its_grams(database_url: str) -> None:
    cases = _cases(random.Random(20), 3000)
    found = _found(database_url, cases)
    missed = [
        case for case, (kept, by_grams) in zip(cases, found, strict=True) if kept and not by_grams
    ]
    assert missed == []
    assert sum(kept for kept, _ in found) > 1000  # the cases hold many hits


def test_the_grams_name_the_needle_not_its_letters_anywhere(database_url: str) -> None:
    cases = [("hello world", "low"), ("hello world", "lo wo"), ("ab ca bc", "abc")]
    assert _found(database_url, cases) == [(False, False), (True, True), (False, False)]


def test_a_text_longer_than_its_grams_is_always_a_candidate(database_url: str) -> None:
    long = "a" * INDEXED_CHARS + "tail end"
    assert _found(database_url, [(long, "tail end"), (long, "zzzzz")]) == [
        (True, True),
        (False, True),
    ]
