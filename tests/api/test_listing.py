"""GET /conversations (listConversations): keyset pages, filters, order,
hostile query parameters, and tenants kept apart."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.api.conftest import assert_refused, auth, new_conversation


async def _list(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await client.get("/conversations", params=params)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


async def _all_ids(client: httpx.AsyncClient, **params: Any) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = await _list(client, **params, **({"cursor": cursor} if cursor else {}))
        ids += [c["id"] for c in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


async def test_pages_newest_first_then_oldest_first(acme: httpx.AsyncClient) -> None:
    created = [await new_conversation(acme, metadata={"n": i}) for i in range(5)]
    first = await _list(acme, limit=2)
    assert [c["id"] for c in first["items"]] == created[:-3:-1]
    assert first["next_cursor"] is not None
    item = first["items"][0]
    assert item["metadata"] == {"n": 4}
    assert item["tenant"] == "acme"
    assert item["version"] == 1
    assert item["archived"] is False
    assert item["updated_at"] is not None
    assert await _all_ids(acme, limit=2) == created[::-1]
    assert await _all_ids(acme, limit=2, order="oldest") == created
    assert (await _list(acme, limit=5))["next_cursor"] is None


async def test_filters(acme: httpx.AsyncClient) -> None:
    billing = await new_conversation(acme, metadata={"project": "billing", "tags": ["a", "b"]})
    other = await new_conversation(acme, metadata={"project": "search", "n": 1})
    archived = await new_conversation(acme, metadata={"project": "billing"})
    await acme.post(f"/conversations/{archived}/archive")
    contains = await _all_ids(acme, metadata=json.dumps({"project": "billing"}))
    assert contains == [archived, billing]
    assert await _all_ids(acme, metadata=json.dumps({"tags": ["b"]})) == [billing]
    assert await _all_ids(acme, metadata=json.dumps({"n": 1.0})) == [other]
    assert await _all_ids(acme, metadata=json.dumps({"n": True})) == []
    assert await _all_ids(acme, metadata="{}") == [archived, other, billing]
    assert await _all_ids(acme, archived="true") == [archived]
    assert await _all_ids(acme, archived="false") == [other, billing]
    page = await _list(acme, metadata=json.dumps({"project": "billing"}), archived="false")
    assert [c["id"] for c in page["items"]] == [billing]


async def test_time_ranges(acme: httpx.AsyncClient) -> None:
    old = await new_conversation(acme)
    await asyncio.sleep(0.01)
    middle = datetime.now(UTC)
    await asyncio.sleep(0.01)
    new = await new_conversation(acme)
    assert await _all_ids(acme, created_from=middle.isoformat()) == [new]
    assert await _all_ids(acme, created_to=middle.isoformat()) == [old]
    # Writing to the old one moves its updated time, not its created time.
    await asyncio.sleep(0.01)
    written = datetime.now(UTC)
    await asyncio.sleep(0.01)
    appended = await acme.post(
        f"/conversations/{old}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert appended.status_code == 201
    assert await _all_ids(acme, updated_from=written.isoformat()) == [old]
    assert await _all_ids(acme, updated_to=written.isoformat()) == [new]
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert await _all_ids(acme, created_from=later) == []


async def test_deleted_conversations_are_not_listed(acme: httpx.AsyncClient) -> None:
    kept = await new_conversation(acme)
    gone = await new_conversation(acme)
    assert (await acme.delete(f"/conversations/{gone}")).status_code == 204
    assert await _all_ids(acme) == [kept]


async def test_another_tenants_conversations_are_not_listed(
    client: httpx.AsyncClient, key: str, other_key: str
) -> None:
    client.headers.update(auth(key))
    await new_conversation(client, metadata={"project": "billing"})
    client.headers.update(auth(other_key))
    assert await _all_ids(client) == []
    assert await _all_ids(client, metadata=json.dumps({"project": "billing"})) == []


def _cursor(values: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"limit": 0}, "query.limit"),
        ({"limit": 1001}, "query.limit"),
        ({"limit": "ten"}, "query.limit"),
        ({"order": "random"}, "query.order"),
        ({"archived": "maybe"}, "query.archived"),
        ({"cursor": "not base64!"}, "query.cursor"),
        ({"cursor": "x" * 401}, "query.cursor"),
        ({"cursor": "AAAA"}, "invalid cursor"),
        ({"cursor": _cursor(["2026-01-01T00:00:00+00:00"])}, "invalid cursor"),
        ({"cursor": _cursor(["yesterday", "x"])}, "invalid cursor"),
        (
            {"cursor": _cursor(["2026-01-01T00:00:00", "00000000-0000-0000-0000-000000000000"])},
            "invalid cursor",
        ),
        ({"cursor": _cursor({"a": 1})}, "invalid cursor"),
        ({"metadata": "{"}, "query.metadata: not valid JSON"),
        ({"metadata": "[1]"}, "query.metadata: must be a JSON object"),
        ({"metadata": '{"a": NaN}'}, "query.metadata"),
        ({"metadata": '{"a": "\\u0000"}'}, "query.metadata"),
        ({"metadata": "[" * 3000 + "]" * 3000}, "query.metadata"),
        ({"metadata": json.dumps({"a": "x" * 5000})}, "query.metadata"),
        ({"metadata": '{"n": ' + "9" * 5000 + "}"}, "query.metadata"),
        ({"created_from": "2026-01-01T00:00:00"}, "query.created_from"),
        ({"updated_to": "soon"}, "query.updated_to"),
    ],
)
async def test_hostile_query_parameters_are_422(
    acme: httpx.AsyncClient, params: dict[str, Any], problem: str
) -> None:
    assert_refused(await acme.get("/conversations", params=params), problem)


async def test_listing_needs_a_key(client: httpx.AsyncClient) -> None:
    assert (await client.get("/conversations")).status_code == 401
