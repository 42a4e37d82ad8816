"""`GET /messages/search` on both backends: hits, filters, pages, 422s, tenants."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import TOOL_TURN, auth, new_conversation

SEARCH = "/messages/search"


async def append(client: httpx.AsyncClient, cid: str, messages: list[dict[str, Any]]) -> None:
    response = await client.post(f"/conversations/{cid}/messages", json={"messages": messages})
    assert response.status_code in (200, 201), response.text


async def search(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await client.get(SEARCH, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def seqs(body: dict[str, Any]) -> list[int]:
    return [hit["seq"] for hit in body["hits"]]


@pytest.fixture
async def seeded(acme: httpx.AsyncClient) -> tuple[str, str]:
    """Two conversations of acme: a tool turn, and some text in two languages."""
    first = await new_conversation(acme, metadata={"project": "atlas"})
    await append(acme, first, TOOL_TURN)
    second = await new_conversation(acme, metadata={"project": "zephyr"})
    await append(
        acme,
        second,
        [
            {"role": "user", "content": "The deploy failed with a timeout"},
            {"role": "assistant", "content": "我们明天在北京见面, then deploy again"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a screenshot of the deploy log"}],
                "agent_id": "main",
            },
        ],
    )
    return first, second


async def test_text_search_finds_words_newest_first_with_a_snippet(
    acme: httpx.AsyncClient, seeded: tuple[str, str]
) -> None:
    _, second = seeded
    body = await search(acme, q="deploy")
    assert [(h["conversation_id"], h["seq"]) for h in body["hits"]] == [
        (second, 3),
        (second, 2),
        (second, 1),
    ]
    hit = body["hits"][-1]
    assert (hit["role"], hit["kind"], hit["batch"]) == ("user", "input", 1)
    assert (hit["agent_id"], hit["edited"]) == ("main", False)
    start, end = hit["highlights"][0]
    assert hit["snippet"][start:end].lower() == "deploy"
    assert body["next_cursor"] is None


async def test_words_of_a_content_array_are_found(
    acme: httpx.AsyncClient, seeded: tuple[str, str]
) -> None:
    assert seqs(await search(acme, q="screenshot")) == [3]


async def test_text_mode_matches_whole_words_and_phrases(
    acme: httpx.AsyncClient, seeded: tuple[str, str]
) -> None:
    assert seqs(await search(acme, q="deplo")) == []
    assert seqs(await search(acme, q='"deploy failed"')) == [1]
    assert seqs(await search(acme, q="deploy -timeout")) == [3, 2]


async def test_substring_finds_text_without_spaces(
    acme: httpx.AsyncClient, seeded: tuple[str, str]
) -> None:
    # On every server: without the substring index (an operator's choice,
    # store.postgres.search_indexes) the statement reads the events.
    body = await search(acme, q="北京见", mode="substring")
    assert seqs(body) == [2]
    hit = body["hits"][0]
    start, end = hit["highlights"][0]
    assert hit["snippet"][start:end] == "北京见"
    assert seqs(await search(acme, q="EPLO", mode="substring")) == [3, 2, 1]
    assert seqs(await search(acme, q="50%_", mode="substring")) == []


@pytest.fixture
async def cjk(acme: httpx.AsyncClient) -> str:
    """Chinese, Japanese, Korean and mixed text without spaces."""
    cid = await new_conversation(acme)
    await append(
        acme,
        cid,
        [
            {"role": "user", "content": "请帮我修复解析器的测试"},
            {"role": "assistant", "content": "好的，我来修复parser的测试。"},
            {"role": "user", "content": "解析器のテストが失敗しました"},
            {"role": "assistant", "content": "한국어 검색을 고쳐 주세요"},
            {"role": "user", "content": [{"type": "text", "text": "测试「通过」了"}]},
        ],
    )
    return cid


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("解析器", [3, 1]),
        ("测试", [5, 2, 1]),
        ("测", [5, 2, 1]),
        ("修复", [2, 1]),
        ("修复 parser", [2]),
        ("修复parser", [2]),
        ('"修复 parser"', [2]),
        ("parser", [2]),
        ("解析器のテスト", [3]),
        ("テスト", [3]),
        ("の", [3]),
        ("검색", [4]),
        ("한", [4]),
        ("通过", [5]),
        ("测试 -解析器", [5, 2]),
        ("解器", []),
        ("器的测", [1]),
    ],
)
async def test_text_search_finds_cjk_words_of_any_length(
    acme: httpx.AsyncClient, cjk: str, q: str, found: list[int]
) -> None:
    assert seqs(await search(acme, q=q)) == found


async def test_cjk_hits_are_highlighted_at_their_characters(
    acme: httpx.AsyncClient, cjk: str
) -> None:
    body = await search(acme, q="解析器 测试")
    hit = body["hits"][0]
    assert (hit["seq"], hit["snippet"]) == (1, "请帮我修复解析器的测试")
    assert hit["highlights"] == [[5, 8], [9, 11]]
    mixed = (await search(acme, q="修复 parser"))["hits"][0]
    assert mixed["snippet"] == "好的，我来修复parser的测试。"
    assert [mixed["snippet"][s:e] for s, e in mixed["highlights"]] == ["修复", "parser"]


async def test_substring_mode_takes_one_or_two_cjk_characters(
    acme: httpx.AsyncClient, cjk: str
) -> None:
    assert seqs(await search(acme, q="测试", mode="substring")) == [5, 2, 1]
    assert seqs(await search(acme, q="の", mode="substring")) == [3]
    assert seqs(await search(acme, q="析器的", mode="substring")) == [1]
    hit = (await search(acme, q="检索", mode="substring"))["hits"]
    assert hit == []
    body = await search(acme, q="修复", mode="substring")
    assert [h["snippet"][s:e] for h in body["hits"] for s, e in h["highlights"]] == ["修复"] * 2


async def test_filters(acme: httpx.AsyncClient, seeded: tuple[str, str]) -> None:
    first, second = seeded
    assert seqs(await search(acme, q="deploy", role="assistant")) == [2]
    assert seqs(await search(acme, q="deploy", kind="input")) == [3, 1]
    assert seqs(await search(acme, q="deploy", agent_id="other")) == []
    assert seqs(await search(acme, q="deploy", batch=1)) == [3, 2, 1]
    assert seqs(await search(acme, q="deploy", batch=2)) == []
    assert seqs(await search(acme, q="deploy", conversation_id=first)) == []
    assert seqs(await search(acme, q="deploy", conversation_id=second)) == [3, 2, 1]
    assert seqs(await search(acme, q="deploy", metadata='{"project": "zephyr"}')) == [3, 2, 1]
    assert seqs(await search(acme, q="deploy", metadata='{"project": "atlas"}')) == []
    # The tool call and its result, by the tool's name.
    assert seqs(await search(acme, q="b.txt")) == [5, 4]
    assert seqs(await search(acme, q="b.txt", tool_name="ls")) == [4]
    assert seqs(await search(acme, q="b.txt", mode="substring", tool_name="ls")) == [4]
    assert seqs(await search(acme, q="b.txt", tool_name="grep")) == []
    hits = (await search(acme, q="deploy"))["hits"]
    at = hits[1]["recorded_at"]
    assert seqs(await search(acme, q="deploy", **{"from": at})) == [3, 2, 1]
    assert seqs(await search(acme, q="deploy", to=at)) == []


async def test_pages_follow_the_cursor(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await append(acme, cid, [{"role": "user", "content": f"needle {i}"} for i in range(7)])
    found: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"q": "needle", "limit": 3}
        if cursor is not None:
            params["cursor"] = cursor
        body = await search(acme, **params)
        found += seqs(body)
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert found == [7, 6, 5, 4, 3, 2, 1]


async def test_compacted_and_edited_messages(acme: httpx.AsyncClient) -> None:
    cid = await new_conversation(acme)
    await append(
        acme,
        cid,
        [
            {"role": "user", "content": "an old remark about lighthouses"},
            {"role": "assistant", "content": "original wording"},
            {"role": "user", "content": "newest"},
        ],
    )
    response = await acme.post(f"/conversations/{cid}/batches", json={"operation": "clear"})
    assert response.status_code in (200, 201), response.text
    # Not visible any more, still found.
    assert seqs(await search(acme, q="lighthouses")) == [1]
    response = await acme.put(
        f"/conversations/{cid}/messages/2", json={"content": "replacement text"}
    )
    assert response.status_code == 200, response.text
    assert seqs(await search(acme, q="original")) == []
    body = await search(acme, q="replacement")
    assert seqs(body) == [2]
    assert body["hits"][0]["edited"] is True


async def test_another_tenant_finds_nothing(
    client: httpx.AsyncClient, seeded: tuple[str, str], other_key: str
) -> None:
    _, second = seeded
    response = await client.get(SEARCH, params={"q": "deploy"}, headers=auth(other_key))
    assert response.status_code == 200
    assert response.json() == {"hits": [], "next_cursor": None}
    response = await client.get(
        SEARCH, params={"q": "deploy", "conversation_id": second}, headers=auth(other_key)
    )
    assert response.json()["hits"] == []


async def test_a_key_is_required(client: httpx.AsyncClient) -> None:
    response = await client.get(SEARCH, params={"q": "deploy"})
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "x" * 501}, "q"),
        ({"q": "   "}, "empty"),
        ({"q": "-flaky -slow"}, "at least one word"),
        ({"q": "ab", "mode": "substring"}, "at least 3 characters"),
        ({"q": "a测", "mode": "substring"}, "with mode=text"),
        ({"q": "「」", "mode": "text"}, "at least one word"),
        ({"q": "a", "mode": "regex"}, "mode"),
        ({"q": "a", "role": "robot"}, "role"),
        ({"q": "a", "kind": "thought"}, "kind"),
        ({"q": "a", "limit": 0}, "limit"),
        ({"q": "a", "limit": 1001}, "limit"),
        ({"q": "a", "limit": "ten"}, "limit"),
        ({"q": "a", "batch": 0}, "batch"),
        ({"q": "a", "batch": 2**31}, "batch"),
        ({"q": "a", "from": "yesterday"}, "from"),
        ({"q": "a", "from": "2026-01-01T00:00:00"}, "time zone"),
        ({"q": "a", "from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "before"),
        ({"q": "a", "metadata": "{"}, "metadata"),
        ({"q": "a", "metadata": "[1]"}, "metadata"),
        ({"q": "a", "metadata": "{" + '"k": [' * 70 + "]" * 70 + "}"}, "metadata"),
        ({"q": "a", "cursor": "not a cursor"}, "cursor"),
        ({"q": "a", "cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
        ({"q": "a", "cursor": "x" * 600}, "cursor"),
        ({"q": "a\x00b"}, "NUL"),
        ({"q": "a", "agent_id": ""}, "agent_id"),
        ({"q": "a", "tool_name": "t" * 201}, "tool_name"),
        ({"q": "a", "conversation_id": "c" * 201}, "conversation_id"),
    ],
)
async def test_bad_queries_are_422_naming_the_problem(
    acme: httpx.AsyncClient, params: dict[str, Any], named: str
) -> None:
    response = await acme.get(SEARCH, params=params)
    assert response.status_code == 422, response.text
    assert named in response.text


async def test_hostile_text_is_searched_not_interpreted(
    acme: httpx.AsyncClient, seeded: tuple[str, str]
) -> None:
    for q in ["!", "&|!()<->:*", "' OR 1=1 --", "\\", "%%%", "___", "-", '"', "OR", "a:*"]:
        response = await acme.get(SEARCH, params={"q": q})
        # No words to find is a 422; anything else is searched as text.
        assert response.status_code in (200, 422), (q, response.text)
        if len(q) >= 3:
            response = await acme.get(SEARCH, params={"q": q, "mode": "substring"})
            assert response.status_code == 200, (q, response.text)


async def test_openapi_describes_every_parameter(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    operation = document["paths"][SEARCH]["get"]
    assert operation["operationId"] == "searchMessages"
    for parameter in operation["parameters"]:
        assert parameter.get("description"), parameter["name"]
