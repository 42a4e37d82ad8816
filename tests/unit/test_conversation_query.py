"""The listing's one query value (`ConversationQuery`): checked as it is
built, whoever builds it (the HTTP route, a caller of the repository)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from store.domain.errors import InvalidOperation
from store.domain.listing import ConversationQuery, conversation_query
from store.memory import InMemoryRepository


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"limit": 0}, "limit must be 1..1000"),
        ({"limit": 1001}, "limit must be 1..1000"),
        ({"limit": True}, "limit must be an integer"),
        ({"order": "sideways"}, "order must be 'newest' or 'oldest'"),
        ({"metadata": {"a": "\x00"}}, "invalid metadata filter"),
        ({"created_to": datetime(2026, 1, 1)}, "created_to needs a time zone"),
        ({"cursor": "not a cursor"}, "invalid cursor"),
        ({"sort": "id"}, "unknown listing filter sort"),
    ],
)
def test_a_bad_query_is_refused_naming_the_problem(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidOperation, match=problem):
        conversation_query(**fields)


def test_a_good_query_decodes_its_cursor() -> None:
    query = ConversationQuery(updated_from=datetime(2026, 1, 1, tzinfo=UTC), order="oldest")
    assert query.after is None
    assert not query.newest


async def test_the_repository_takes_the_query_or_its_fields() -> None:
    repository = InMemoryRepository()
    ids = [(await repository.create_conversation(metadata={"n": n})).id for n in range(3)]

    by_query = await repository.list_conversations(ConversationQuery(order="oldest", limit=2))
    by_fields = await repository.list_conversations(order="oldest", limit=2)

    assert by_query == by_fields
    assert [c.id for c in by_query.items] == ids[:2]
    with pytest.raises(InvalidOperation, match="not both"):
        await repository.list_conversations(ConversationQuery(), limit=2)
