"""Contract: listing conversations, metadata updates, archived means
read-only — the same answers from the in-memory storage and PostgreSQL.
(Each test lists under a tenant of its own: PostgreSQL runs share a database.)"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from store.domain.errors import ConversationIsArchived, ConversationNotFound, InvalidOperation
from store.repository import Repository
from tests.contract.conftest import (
    RepositoryFactory,
    assistant,
    call,
    system,
    tool,
    user,
)


def _tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


async def _ids(repository: Repository, **filters: Any) -> list[str]:
    found: list[str] = []
    cursor = None
    while True:
        page = await repository.list_conversations(cursor=cursor, limit=2, **filters)
        found += [c.id for c in page.items]
        cursor = page.next_cursor
        if cursor is None:
            return found


async def test_pages_in_both_orders(make_repository: RepositoryFactory) -> None:
    repository = make_repository(tenant=_tenant())
    created = [(await repository.create_conversation()).id for _ in range(5)]
    assert await _ids(repository) == created[::-1]
    assert await _ids(repository, order="oldest") == created
    assert await _ids(make_repository(tenant=_tenant())) == []


@pytest.mark.parametrize(
    ("contained", "matches"),
    [
        ({"a": 1}, True),
        ({"a": 1.0}, True),
        ({"a": True}, False),
        ({"b": {"c": [2]}}, True),
        ({"b": {"c": [2, 4]}}, False),
        ({"b": {}}, True),
        ({"d": None}, True),
        ({"d": False}, False),
        ({"e": "x"}, False),
        ({}, True),
    ],
)
async def test_metadata_containment_is_jsonb_containment(
    make_repository: RepositoryFactory, contained: dict[str, Any], matches: bool
) -> None:
    repository = make_repository(tenant=_tenant())
    created = await repository.create_conversation(
        metadata={"a": 1, "b": {"c": [1, 2, 3]}, "d": None}
    )
    assert await _ids(repository, metadata=contained) == ([created.id] if matches else [])


async def test_archived_is_read_only_until_unarchived(repository: Repository) -> None:
    conversation = await repository.create_conversation()
    cid = conversation.id
    await repository.append_messages(cid, [user("one")])
    archived = await repository.archive(cid)
    assert archived.archived
    with pytest.raises(ConversationIsArchived):
        await repository.append_messages(cid, [user("two")])
    with pytest.raises(ConversationIsArchived):
        await repository.update_metadata(cid, {"a": 1})
    with pytest.raises(ConversationIsArchived):
        await repository.update_slot(cid, "notes", "x")
    assert (await repository.get_conversation(cid)).version == archived.version
    unarchived = await repository.unarchive(cid)
    assert not unarchived.archived
    assert unarchived.version == archived.version + 1
    await repository.append_messages(cid, [user("two")])


async def test_metadata_updates_are_events(repository: Repository) -> None:
    cid = (await repository.create_conversation(metadata={"a": 1, "b": 2})).id
    updated = await repository.update_metadata(cid, {"a": None, "c": {"d": 1}})
    assert updated.metadata == {"b": 2, "c": {"d": 1}}
    assert updated.version == 2
    assert (await repository.update_metadata(cid, {"b": 2})).version == 2
    replaced = await repository.update_metadata(cid, {"z": 0}, replace=True)
    assert replaced.metadata == {"z": 0}
    with pytest.raises(ConversationNotFound):
        await repository.for_tenant(_tenant()).update_metadata(cid, {"a": 1})


async def test_history_pages_filter_by_role_agent_kind_and_scope(repository: Repository) -> None:
    cid = (await repository.create_conversation()).id
    await repository.append_messages(
        cid,
        [
            user("one"),
            user("two", agent_id="helper"),
            system("three", kind="reminder"),
        ],
    )
    page = await repository.page_messages(cid, limit=2)
    assert [m.seq for m in page.items] == [1, 2]
    assert page.next_after_seq == 2
    last = await repository.page_messages(cid, order="desc", limit=1, agent_id="main")
    assert [m.seq for m in last.items] == [3]
    assert last.next_before_seq == 3
    assert [m.seq for m in await repository.read_messages(cid, kind="reminder")] == [3]
    assert [m.seq for m in await repository.read_messages(cid, scope="visible")] == [1, 2, 3]
    with pytest.raises(InvalidOperation):
        await repository.read_messages(cid, kind="chatter")
    window = await repository.read_window(cid, limit=2)
    assert [m.seq for m in window.items] == [1, 2]
    assert window.next_cursor is not None
    rest = await repository.read_window(cid, cursor=window.next_cursor)
    assert [m.seq for m in rest.items] == [3]
    assert rest.next_cursor is None


async def test_a_roles_history_pages_from_any_cursor(repository: Repository) -> None:
    """A role's pages are its messages in seq order, whichever cursor a page
    starts from: the previous page's last message (PostgreSQL walks the
    role's index from it) or any other seq (it walks the history)."""
    cid = (await repository.create_conversation()).id
    messages = [system("rules")]
    for turn in range(8):
        messages += [user(f"ask {turn}"), assistant(f"answer {turn}")]
        if turn % 3 == 1:
            messages += [assistant("", call(f"c{turn}")), tool(f"c{turn}")]
        if turn == 5:
            messages.append(system("reminder", kind="reminder", agent_id="helper"))
    await repository.append_messages(cid, messages)
    history = await repository.read_messages(cid, limit=1000)
    last = history[-1].seq
    for role in ("system", "user", "assistant", "tool"):
        expected = [m.seq for m in history if m.role == role]
        for order in ("asc", "desc"):
            want = expected if order == "asc" else expected[::-1]
            found: list[int] = []
            after = before = None
            while True:
                page = await repository.page_messages(
                    cid, role=role, order=order, limit=2, after_seq=after, before_seq=before
                )
                found += [m.seq for m in page.items]
                after, before = page.next_after_seq, page.next_before_seq
                if after is None and before is None:
                    break
            assert found == want, (role, order)
        # From every seq (a message of the role or not), both ways, and between two.
        for cursor in range(0, last + 2):
            up = await repository.read_messages(cid, role=role, after_seq=cursor, limit=3)
            assert [m.seq for m in up] == [s for s in expected if s > cursor][:3]
            down = await repository.read_messages(
                cid, role=role, order="desc", before_seq=cursor, limit=3
            )
            assert [m.seq for m in down] == [s for s in expected if s < cursor][::-1][:3]
        between = await repository.read_messages(cid, role=role, after_seq=3, before_seq=last - 2)
        assert [m.seq for m in between] == [s for s in expected if 3 < s < last - 2]
    # With the other filters.
    helper = await repository.read_messages(cid, role="system", agent_id="helper")
    assert [m.text for m in helper] == ["reminder"]
    reminders = await repository.read_messages(cid, role="system", kind="reminder", order="desc")
    assert [m.text for m in reminders] == ["reminder"]
