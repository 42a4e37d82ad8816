"""Appends decided on what a storage remembers (docs/storage.md, "Appends in
one round trip") are right even when the memory is out of date: another
process (here, another storage on the same database) wrote in between, or
the conversation went away. Nothing is lost, written twice, or refused
that the database would have accepted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
import pytest_asyncio

from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    IdempotencyConflict,
    InvalidMessage,
)
from store.domain.messages import Message, ToolCall
from store.postgres import PostgresStorage
from store.postgres.urls import libpq_url
from store.repository import Repository
from tests.busy import retried_while_busy


@pytest_asyncio.fixture
async def other(database_url: str) -> AsyncIterator[Repository]:
    """A second process's repository: its own storage, its own memory."""
    storage = await PostgresStorage.connect(database_url, min_size=1, max_size=4)
    yield Repository(storage)
    await storage.close()


def user(text: str) -> Message:
    return Message(role="user", content=text)


async def test_a_write_from_elsewhere_is_read_not_refused(
    repository: Repository, other: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    mine = await repository.append_messages(cid, [user("one")])  # remembered: version 2
    theirs = await other.append_messages(cid, [user("two")], expected_version=mine.version)

    # Its memory says version 2; the row says 3: the caller, who knows, is right.
    third = await repository.append_messages(cid, [user("three")], expected_version=theirs.version)

    assert third.version == theirs.version + 1
    assert [m.seq for m in third.messages] == [3]
    history = await repository.read_messages(cid)
    assert [(m.seq, m.text) for m in history] == [(1, "one"), (2, "two"), (3, "three")]


async def test_an_expectation_the_row_does_not_meet_is_still_a_conflict(
    repository: Repository, other: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    first = await repository.append_messages(cid, [user("one")])
    await other.append_messages(cid, [user("two")])

    with pytest.raises(ConcurrencyConflict) as raised:
        await repository.append_messages(cid, [user("late")], expected_version=first.version)

    assert raised.value.actual == first.version + 1
    assert [m.text for m in await repository.read_messages(cid)] == ["one", "two"]


async def test_a_conversation_deleted_elsewhere_is_not_written(
    repository: Repository, other: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    await repository.append_messages(cid, [user("one")])
    await other.delete(cid)

    with pytest.raises(ConversationDeleted):
        await repository.append_messages(cid, [user("after")])


async def test_a_call_id_used_before_is_refused_as_under_the_lock(repository: Repository) -> None:
    cid = (await repository.create_conversation()).id
    call = ToolCall(id="c1", name="ls")
    await repository.append_messages(cid, [Message(role="assistant", tool_calls=(call,))])
    answered = await repository.append_messages(
        cid, [Message(role="tool", tool_call_id="c1", content="ok")]
    )

    # The memory knows c1 no longer as pending: the database says it is taken.
    with pytest.raises(InvalidMessage, match="c1"):
        await repository.append_messages(cid, [Message(role="assistant", tool_calls=(call,))])

    assert (await repository.get_conversation(cid)).version == answered.version
    again = await repository.append_messages(cid, [user("still writable")])
    assert again.version == answered.version + 1


async def test_the_recorded_time_is_the_databases(repository: Repository) -> None:
    cid = (await repository.create_conversation()).id
    await repository.append_messages(cid, [user("one")])
    appended = await repository.append_messages(cid, [user("two")])  # one round trip

    stored = await repository.read_messages(cid, order="desc", limit=1)

    assert appended.messages[0].recorded_at == stored[0].recorded_at


async def test_two_processes_appending_to_one_conversation_lose_nothing(
    repository: Repository, other: Repository
) -> None:
    cid = (await repository.create_conversation()).id
    per_writer = 30

    async def writer(repo: Repository, name: str) -> None:
        for i in range(per_writer):
            await retried_while_busy(repo.append_messages, cid, [user(f"{name}{i}")])

    await asyncio.gather(
        *(
            writer(repo, f"{name}{w}-")
            for w in range(3)
            for repo, name in ((repository, "a"), (other, "b"))
        )
    )

    history = await repository.read_messages(cid, limit=1000)
    texts = [m.text for m in history]
    assert len(texts) == len(set(texts)) == 6 * per_writer
    assert [m.seq for m in history] == list(range(1, 6 * per_writer + 1))
    assert (await repository.get_conversation(cid)).version == 1 + 6 * per_writer


async def test_a_write_committed_while_the_append_waited_for_the_row_is_seen(
    repository: Repository, other: Repository, database_url: str
) -> None:
    """The optimistic append is one statement that skips a row another
    transaction holds: while another process's append holds it, the
    statement writes nothing, and the append is decided again the way that
    waits for the lock, after that append, not over it. (Not by tripping
    over the events' primary key either, which would fail the statement
    and cost its connection.)"""
    storage = repository.storage
    assert isinstance(storage, PostgresStorage)
    cid = (await repository.create_conversation()).id
    await repository.append_messages(cid, [user("one")])  # remembered
    url = libpq_url(database_url)
    async with (
        await psycopg.AsyncConnection.connect(url) as blocker,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as watcher,
    ):

        async def waiting() -> int:
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = await cursor.fetchone()
            assert row is not None
            return int(row[0])

        async def until_waiting(count: int) -> None:
            for _ in range(500):
                if await waiting() >= count:
                    return
                await asyncio.sleep(0.01)
            raise AssertionError(f"never {count} waiting")

        # Their append locks the row, then waits to read its idempotency key.
        await blocker.execute("LOCK TABLE append_requests IN ACCESS EXCLUSIVE MODE")
        theirs = asyncio.create_task(other.append_messages(cid, [user("two")], idempotency_key="k"))
        await until_waiting(1)
        mine = asyncio.create_task(repository.append_messages(cid, [user("three")]))
        await until_waiting(2)  # ours waits for the row, decided again under its lock
        spoiled = storage.pool.get_stats().get("returns_bad", 0)
        await blocker.rollback()
        their_append, my_append = await asyncio.gather(theirs, mine)

    assert storage.pool.get_stats().get("returns_bad", 0) == spoiled

    assert my_append.version == their_append.version + 1
    assert [m.seq for m in my_append.messages] == [3]
    history = await repository.read_messages(cid)
    assert [(m.seq, m.text) for m in history] == [(1, "one"), (2, "two"), (3, "three")]
    assert (await repository.get_conversation(cid)).version == my_append.version


@pytest.mark.parametrize("first_from", ["this process", "another process"])
async def test_a_retry_decided_from_memory_is_answered_not_written(
    repository: Repository, other: Repository, first_from: str
) -> None:
    """An append with an idempotency key or client ids is decided from memory
    as a first attempt; a retry of one (from this process or another) is
    found by the write's guard, not by a unique index (which would fail the
    statement and cost its connection), and answered from the first
    attempt. A key reused for another request is refused as under the lock."""
    storage = repository.storage
    assert isinstance(storage, PostgresStorage)
    cid = (await repository.create_conversation()).id
    await repository.append_messages(cid, [user("zero")])  # remembered
    first_writer = repository if first_from == "this process" else other
    keyed = await first_writer.append_messages(cid, [user("one")], idempotency_key="k1")
    tagged = Message(role="user", content="two", client_message_id="c2")
    identified = await first_writer.append_messages(cid, [tagged])
    if first_from == "another process":
        await repository.append_messages(cid, [user("three")])  # remembered again
    spoiled = storage.pool.get_stats().get("returns_bad", 0)

    again = await repository.append_messages(cid, [user("one")], idempotency_key="k1")
    assert again.replayed
    assert again.messages == keyed.messages
    again = await repository.append_messages(cid, [tagged])
    assert again.replayed
    assert again.messages == identified.messages
    with pytest.raises(IdempotencyConflict):
        await repository.append_messages(cid, [user("not one")], idempotency_key="k1")
    fresh = await repository.append_messages(cid, [user("four")], idempotency_key="k4")

    assert not fresh.replayed
    assert storage.pool.get_stats().get("returns_bad", 0) == spoiled
    texts = [m.text for m in await repository.read_messages(cid)]
    assert texts == [
        "zero",
        "one",
        "two",
        *(["three"] if first_from != "this process" else []),
        "four",
    ]
