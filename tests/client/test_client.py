"""The async client against the app on each backend: answers as the store's
values, errors as the library's classes, paging iterators that read
everything once, and the adapters' methods with the repository's signatures."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import httpx
import pytest

from hosting.settings import Settings
from store.assembler import EmptyWindow
from store.client import AsyncConvoClient, Unauthorized, ValidationError, problem_of
from store.domain.context import AgentProfile, TodoItem
from store.domain.errors import (
    BoundaryError,
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationExists,
    ConversationIsArchived,
    ConversationNotFound,
    IdempotencyConflict,
    InvalidMessage,
    InvalidOperation,
)
from store.domain.feed import FeedEvent
from store.domain.feed_vector import FIRST_PARTITION, parse_position
from store.domain.search import search_query
from store.repository import ConversationRepository, Repository
from store.repository.port import Storage
from tests.api.conftest import TOOL_TURN
from tests.client.serving import BASE_URL, serving


async def _feed_of(repository: Repository, count: int) -> list[FeedEvent]:
    """The tenant's feed once it shows `count` events."""
    for _ in range(200):
        events = (await repository.read_events(limit=100)).events
        if len(events) >= count:
            return events
        await asyncio.sleep(0.05)
    raise AssertionError(f"the feed shows {len(events)} events, not {count}")


def _turns(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


def test_the_client_has_the_adapters_methods_with_the_repository_signatures() -> None:
    methods = [
        name
        for name, member in inspect.getmembers(ConversationRepository)
        if inspect.iscoroutinefunction(member)
    ]
    assert len(methods) == 14
    for name in methods:
        want = inspect.signature(getattr(ConversationRepository, name))
        assert inspect.signature(getattr(AsyncConvoClient, name)) == want, name
        local = inspect.signature(getattr(Repository, name))
        # The repository's first parameter is positional only by its decorator.
        assert list(local.parameters)[1:] == list(want.parameters)[1:], name


async def test_a_conversation_written_over_http_is_the_repositorys(
    client: AsyncConvoClient, repository: Repository
) -> None:
    created = await client.create_conversation("team/alice", metadata={"project": "x"})
    assert (created.id, created.version, created.metadata) == ("team/alice", 1, {"project": "x"})
    appended = await client.append_messages("team/alice", TOOL_TURN)
    assert [m.seq for m in appended.messages] == [1, 2, 3, 4, 5]
    assert not appended.replayed
    assert await client.visible_window("team/alice") == await repository.visible_window(
        "team/alice"
    )
    assert await client.get_conversation("team/alice") == await repository.get_conversation(
        "team/alice"
    )
    assert await client.tool_blocks("team/alice") == await repository.tool_blocks("team/alice")
    assert await client.read_messages(
        "team/alice", order="desc", limit=2
    ) == await repository.read_messages("team/alice", order="desc", limit=2)
    assert await client.count_by_role("team/alice") == {
        "system": 1,
        "user": 1,
        "assistant": 2,
        "tool": 1,
    }
    todo = [TodoItem(id="1", content="write it")]
    version = await client.update_slot("team/alice", "todo", todo, expected_version=6)
    assert version == 7
    assert (await client.context_slots("team/alice")).todo == tuple(todo)
    await client.configure_agent(
        "team/alice", AgentProfile(agent_id="main", system_prompt="Be kind.")
    )
    assert (await client.agent_profile("team/alice")).system_prompt == "Be kind."
    truncated = await client.truncate("team/alice", keep_last=1)
    assert (truncated.batch, truncated.visible) == (2, 1)
    assert [b.number for b in await client.batches("team/alice")] == [1, 2]
    assert len(await client.batch_messages("team/alice", 1)) == 5
    fork = await client.fork("team/alice", new_conversation_id="fork", up_to_seq=2)
    assert [m.content for m in await repository.visible_window(fork.id)] == [
        "You are terse.",
        "list the files",
    ]
    cleared = await client.clear("team/alice", keep_system=False)
    assert cleared.visible == 0
    assert await client.pin_message("fork", 1) == fork.version + 1
    assert (await client.replace("fork", 2, "list them")) == fork.version + 2
    assert (await client.recent_by_role("fork", "user", 1))[0].content == "list them"
    assert [m.seq for m in await client.role_range("fork", "system", 1, 1)] == [1]
    payload = (await client.assemble("fork", format="anthropic")).payload
    assert payload["system"]
    assert (await client.update_metadata("fork", {"a": 1})).metadata == {"a": 1}
    assert (await client.archive("fork")).archived
    assert not (await client.unarchive("fork")).archived
    await client.delete("fork")
    with pytest.raises(ConversationDeleted):
        await client.get_conversation("fork")


async def test_an_append_carries_a_fresh_idempotency_key_a_named_one_is_kept(
    client: AsyncConvoClient,
) -> None:
    await client.create_conversation("c")
    first = await client.append_messages("c", _turns(1), idempotency_key="turn-1")
    again = await client.append_messages("c", _turns(1), idempotency_key="turn-1")
    assert again.replayed
    assert again.messages == first.messages
    with pytest.raises(IdempotencyConflict) as refused:
        await client.append_messages("c", _turns(2), idempotency_key="turn-1")
    assert refused.value.key == "turn-1"
    # Without a key the client makes one per append: the same content twice is two appends.
    one = await client.append_messages("c", _turns(1))
    two = await client.append_messages("c", _turns(1))
    assert (one.replayed, two.replayed) == (False, False)
    assert two.messages[0].seq == one.messages[0].seq + 1


async def test_problem_details_are_the_librarys_errors(
    client: AsyncConvoClient, storage: Storage, settings: Settings
) -> None:
    with pytest.raises(ConversationNotFound) as missing:
        await client.get_conversation("nobody")
    assert missing.value.conversation_id == "nobody"
    assert str(missing.value) == "conversation nobody does not exist"
    problem = problem_of(missing.value)
    assert problem is not None
    assert (problem.status, problem.type) == (404, "ConversationNotFound")

    await client.create_conversation("c")
    with pytest.raises(ConversationExists) as exists:
        await client.create_conversation("c")
    assert isinstance(exists.value, ConcurrencyConflict)
    assert exists.value.actual == 1

    with pytest.raises(ConcurrencyConflict) as stale:
        await client.append_messages("c", _turns(1), expected_version=7)
    assert (stale.value.expected, stale.value.actual) == (7, 1)

    # Refused by the store, not by the client's own checks: the call is unknown.
    with pytest.raises(InvalidMessage) as orphan:
        await client.append_messages("c", [{"role": "tool", "tool_call_id": "x", "content": ""}])
    assert "x" in str(orphan.value)
    assert isinstance(orphan.value.problem, str)
    assert "x" in orphan.value.problem
    refused = problem_of(orphan.value)
    assert refused is not None
    assert refused.type == "InvalidMessage"
    # Refused before sending, as the library refuses it.
    with pytest.raises(InvalidMessage) as shape:
        await client.append_messages("c", [{"role": "tool", "content": "no id"}])
    assert shape.value.index == 0

    await client.append_messages("c", TOOL_TURN[1:3])
    with pytest.raises(BoundaryError):
        await client.clear("c", keep_system=False)
    with pytest.raises(InvalidOperation):
        await client.truncate("c", keep_last=1, keep_first=1)

    await client.create_conversation("empty")
    with pytest.raises(EmptyWindow) as empty:
        await client.assemble("empty", format="anthropic")
    assert "nothing to send" in str(empty.value)

    await client.archive("c")
    with pytest.raises(ConversationIsArchived):
        await client.append_messages("c", _turns(1))

    with pytest.raises(ValidationError) as invalid:
        await client.read_messages("c", limit=0)
    assert [f.pointer for f in invalid.value.fields] == ["/query/limit"]
    assert isinstance(invalid.value, InvalidOperation)

    app, _ = serving(storage, settings)
    async with AsyncConvoClient(
        BASE_URL, api_key="cs_wrong", transport=httpx.ASGITransport(app=app)
    ) as stranger:
        with pytest.raises(Unauthorized):
            await stranger.get_conversation("c")


async def test_paging_iterators_read_everything_once(
    client: AsyncConvoClient, repository: Repository
) -> None:
    for n in range(5):
        await client.create_conversation(f"c{n}", metadata={"n": n})
    listed = [c.id async for c in client.iter_conversations(order="oldest", limit=2)]
    assert listed == ["c0", "c1", "c2", "c3", "c4"]
    only = [c.id async for c in client.iter_conversations(metadata={"n": 3}, limit=1)]
    assert only == ["c3"]

    await client.append_messages("c0", _turns(7))
    forward = [m.seq async for m in client.iter_messages("c0", page_size=3)]
    assert forward == [1, 2, 3, 4, 5, 6, 7]
    backward = [m.seq async for m in client.iter_messages("c0", order="desc", page_size=2)]
    assert backward == [7, 6, 5, 4, 3, 2, 1]
    users = [m.seq async for m in client.iter_messages("c0", role="user", page_size=2)]
    assert users == [1, 3, 5, 7]

    window = await client.read_window("c0", limit=4)
    rest = await client.read_window("c0", cursor=window.next_cursor, limit=4)
    assert [m.seq for m in window.items + rest.items] == forward
    assert rest.next_cursor is None

    events = [e async for e in client.iter_conversation_events("c0", page_size=3)]
    assert [e.version for e in events] == list(range(1, 9))
    # The feed holds an event back while a transaction that might commit
    # below it runs (store.domain.feed): on a busy server, for a moment.
    local = await _feed_of(repository, 5 + 7)
    feed = [e async for e in client.iter_events(page_size=4)]
    assert feed == local
    after = [e async for e in client.iter_events(after=parse_position(feed[9].checkpoint))]
    assert after == feed[10:]
    # A position of before partitions (of the first partition) resumes at the same place.
    old = parse_position(feed[9].checkpoint).at(FIRST_PARTITION)
    assert [e async for e in client.iter_events(after=old)] == feed[10:]
    assert [e async for e in client.iter_events(after=f"{old.transaction_id}-{old.position}")] == (
        feed[10:]
    )

    await client.append_messages(
        "c1", [{"role": "user", "content": f"deploy {n}"} for n in range(5)]
    )
    exported = [line async for line in client.export("c1")]
    assert [(line["type"], line["seq"]) for line in exported] == [("user", n) for n in range(1, 6)]
    log = [line async for line in client.export("c1", events=True)]
    assert [line["version"] for line in log] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ConversationNotFound):
        [line async for line in client.export("nobody")]

    found = [h.seq async for h in client.iter_search(search_query(q="deploy", limit=2))]
    assert sorted(found) == [1, 2, 3, 4, 5]
