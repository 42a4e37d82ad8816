"""Appends through `Repository` on PostgreSQL, seen from the global feed.

The repository's rules — expected versions, creating twice, idempotent
retries by key or client ids, tenants — are the contract suite's
(tests/contract/test_appends.py, test_conversations.py), run against both
backends. What only PostgreSQL has is the feed: every event of every
conversation, in one order every reader shares. Here: what an append puts
in the feed, in what order, with what positions, and that a refused or
replayed write puts nothing there at all.
"""

from __future__ import annotations

import pytest

from store.domain.conversation_keys import stream_id
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationExists,
    ConversationNotFound,
    IdempotencyConflict,
    InvalidMessage,
)
from store.domain.messages import Message
from store.domain.records import FeedPosition, RecordedEvent
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.integration.conftest import own_head, read_feed_until, settled_head, texts, user


async def only_new_events_are(
    storage: PostgresStorage, repository: Repository, after: FeedPosition
) -> list[RecordedEvent]:
    """Append a sentinel, wait for it, return what came before it since `after`.

    The feed trails commits by design; an append committed after every
    write under test shows only once those writes are settled too, so
    "nothing before the sentinel" means "nothing written", not "not yet".
    """
    sentinel = await repository.create_conversation()
    feed = await read_feed_until(storage, after, 1)
    while feed[-1].conversation_id != stream_id(repository.tenant, sentinel.id):
        feed = await read_feed_until(storage, after, len(feed) + 1)
    assert [(e.type, e.version) for e in feed[-1:]] == [("conversation_started", 1)]
    return feed[:-1]


async def test_an_empty_database_has_an_empty_feed(storage: PostgresStorage) -> None:
    assert await own_head(storage) == FeedPosition.start()
    assert await storage.read_feed(FeedPosition.start(), 100) == []


async def test_feed_returns_appended_events_in_order(
    storage: PostgresStorage, repository: Repository
) -> None:
    start = await own_head(storage)
    a_key = (await repository.create_conversation()).id
    b_key = (await repository.create_conversation()).id
    first = await repository.append_messages(a_key, [user("one"), user("two")])
    second = await repository.append_messages(b_key, [user("three")])
    # The storage's feed names streams (the derived ids), not the callers' ids.
    a, b = (stream_id(repository.tenant, k) for k in (a_key, b_key))

    feed = await read_feed_until(storage, start, 5)

    assert [(e.conversation_id, e.version, e.type) for e in feed] == [
        (a, 1, "conversation_started"),
        (b, 1, "conversation_started"),
        (a, 2, "message_appended"),
        (a, 3, "message_appended"),
        (b, 2, "message_appended"),
    ]
    assert texts(feed) == [None, None, "one", "two", "three"]
    # One append is one transaction: its events share an id and a time, the
    # time its messages report; later appends have later transaction ids.
    assert feed[2].transaction_id == feed[3].transaction_id
    assert feed[2].recorded_at == feed[3].recorded_at
    assert [m.recorded_at for m in first.messages] == [feed[2].recorded_at] * 2
    assert [m.recorded_at for m in second.messages] == [feed[4].recorded_at]
    ids = [e.transaction_id for e in feed]
    assert ids[0] < ids[1] < ids[2] == ids[3] < ids[4]
    # Within a transaction, events are in version order by position.
    assert feed[2].position < feed[3].position
    # Nothing after the last event; the head is the last event read.
    assert await storage.read_feed(feed[-1].feed_position, 100) == []
    assert await own_head(storage) == feed[-1].feed_position
    # Every reader, at any later time, reads the same feed.
    assert await storage.read_feed(start, 100) == feed


async def test_feed_pages_resume_where_the_last_one_ended(
    storage: PostgresStorage, repository: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    for i in range(10):
        await repository.append_messages(cid, [user(f"m{i}")])
    whole = await read_feed_until(storage, FeedPosition.start(), 11)

    pages: list[list[RecordedEvent]] = []
    position = FeedPosition.start()
    while page := await storage.read_feed(position, 3):
        pages.append(page)
        position = page[-1].feed_position

    assert [len(p) for p in pages] == [3, 3, 3, 2]
    assert [e for p in pages for e in p] == whole
    assert [e.version for e in whole] == list(range(1, 12))
    assert texts(whole)[1:] == [f"m{i}" for i in range(10)]


async def test_refused_writes_add_nothing_to_the_feed(
    storage: PostgresStorage, repository: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    await repository.append_messages(
        cid, [user("hi", "m1")], expected_version=1, idempotency_key="turn-1"
    )
    mark = await settled_head(storage, 2)

    # A stale expected version names both versions.
    with pytest.raises(ConcurrencyConflict) as caught:
        await repository.append_messages(cid, [user("late")], expected_version=1)
    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert "expected 1" in str(caught.value)
    assert "version 2" in str(caught.value)
    # Creating it again is a NO_STREAM expectation on a stream that exists:
    # a ConversationExists, which is a ConcurrencyConflict expecting no stream.
    with pytest.raises(ConversationExists, match="already exists") as exists:
        await repository.create_conversation(cid)
    assert isinstance(exists.value, ConcurrencyConflict)
    assert exists.value.expected == "no stream"
    # A key reused for other content; a client id reused for other content;
    # a retry of which only some client ids are stored.
    with pytest.raises(IdempotencyConflict, match="turn-1"):
        await repository.append_messages(cid, [user("bye")], idempotency_key="turn-1")
    with pytest.raises(IdempotencyConflict, match="m1"):
        await repository.append_messages(cid, [user("other", "m1")])
    with pytest.raises(IdempotencyConflict, match="already stored and others are not"):
        await repository.append_messages(cid, [user("hi", "m1"), user("new", "m2")])
    # An invalid message, after a valid one in the same append.
    with pytest.raises(InvalidMessage):
        await repository.append_messages(
            cid, [user("fine"), Message(role="tool", tool_call_id="ghost", content="x")]
        )
    # Another tenant cannot append to it; its own conversation of that id
    # is another stream (ids are unique per tenant).
    other = repository.for_tenant("other")
    with pytest.raises(ConversationNotFound):
        await other.append_messages(cid, [user("intruder")])
    with pytest.raises(ConversationNotFound):
        await other.get_conversation(cid)

    assert await only_new_events_are(storage, repository, mark) == []
    assert (await repository.get_conversation(cid)).version == 2


async def test_replayed_retries_add_nothing_to_the_feed(
    storage: PostgresStorage, repository: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    by_key = [user("a"), user("b")]
    by_ids = [user("c", "m1"), user("d", "m2")]
    first_by_key = await repository.append_messages(
        cid, by_key, expected_version=1, idempotency_key="req-1"
    )
    first_by_ids = await repository.append_messages(cid, by_ids)
    mark = await settled_head(storage, 5)

    # Each retry carries the expectation its first attempt had: answered
    # from what the first attempt stored, not refused as stale.
    retry_by_key = await repository.append_messages(
        cid, by_key, expected_version=1, idempotency_key="req-1"
    )
    retry_by_ids = await repository.append_messages(cid, by_ids, expected_version=3)

    assert retry_by_key.replayed
    assert retry_by_ids.replayed
    assert retry_by_key.messages == first_by_key.messages
    assert retry_by_ids.messages == first_by_ids.messages
    assert retry_by_key.version == retry_by_ids.version == 5
    assert await only_new_events_are(storage, repository, mark) == []
    feed = await storage.read_feed(FeedPosition.start(), 100)
    stream = stream_id(repository.tenant, cid)
    assert texts([e for e in feed if e.conversation_id == stream]) == [None, "a", "b", "c", "d"]


async def test_other_tenants_conversations_are_in_the_feed_but_not_readable(
    storage: PostgresStorage, repository: Repository
) -> None:
    """The feed is the operator's view of every tenant (for projections
    elsewhere); a tenant's repository still sees only its own."""
    acme = repository.for_tenant("acme")
    globex = repository.for_tenant("globex")
    theirs = (await acme.create_conversation()).id
    await acme.append_messages(theirs, [user("acme only")])

    feed = await read_feed_until(storage, FeedPosition.start(), 2)

    stream = stream_id("acme", theirs)
    assert [(e.conversation_id, e.version) for e in feed] == [(stream, 1), (stream, 2)]
    assert feed[0].data["tenant"] == "acme"
    with pytest.raises(ConversationNotFound):
        await globex.visible_window(theirs)
    with pytest.raises(ConversationNotFound):
        await globex.append_messages(theirs, [user("mine now")])
    assert [m.text for m in await acme.visible_window(theirs)] == ["acme only"]


async def test_feed_sees_conversations_created_by_chosen_id(
    storage: PostgresStorage, repository: Repository
) -> None:
    chosen = "user-123"
    await repository.create_conversation(chosen, metadata={"k": "v"})
    [started] = await read_feed_until(storage, FeedPosition.start(), 1)
    assert (started.conversation_id, started.version, started.type) == (
        stream_id(repository.tenant, chosen),
        1,
        "conversation_started",
    )
    # The log records the id its creator chose.
    assert started.data == {"tenant": "default", "key": "user-123", "metadata": {"k": "v"}}
