"""What an append costs on the wire: round trips and statements, counted.

libpq's protocol trace records every message the client sends. A round
trip is a `Sync` (the client waits for the server's answers up to it); a
statement is a `Bind`. An append is at most two round trips whatever it
carries (see store.postgres.storage): the lock with every lookup, then the
write with COMMIT. An append the storage can decide from what it remembers
of its own last append there is one statement: the guarded write, in
autocommit, with or without an idempotency key or client ids
(docs/storage.md, "Appends in one round trip").
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from store.domain.messages import Message, ToolCall
from store.postgres import PostgresStorage
from store.postgres.feed_signal import NOTIFY_DELAY
from store.repository import Repository


@pytest_asyncio.fixture
async def storage(database_url: str) -> AsyncIterator[PostgresStorage]:
    # One connection, so the traced one is the one every call uses.
    storage = await PostgresStorage.connect(database_url, min_size=1, max_size=1)
    yield storage
    await storage.close()


async def _wire(storage: PostgresStorage, call: Callable[[], Awaitable[Any]]) -> tuple[int, int]:
    """(round trips, statements) that `call` sends."""
    # The feed's NOTIFY after the previous write (store.postgres.feed_signal)
    # goes out on the pool's one connection: let it go before tracing.
    await asyncio.sleep(4 * NOTIFY_DELAY)
    notifier = storage._feed_signal._notifier
    if notifier is not None:  # still sending, on a loaded machine
        await notifier
    with tempfile.TemporaryFile("w+") as trace:
        async with storage.pool.connection() as conn:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            await call()
        finally:
            async with storage.pool.connection() as conn:
                conn.pgconn.untrace()
        trace.seek(0)
        sent = [line.rstrip("\n").split("\t") for line in trace if line.startswith("F")]
    return sum(m[2] == "Sync" for m in sent), sum(m[2] == "Bind" for m in sent)


def user(text: str, **extra: Any) -> Message:
    return Message(role="user", content=text, **extra)


@pytest.mark.parametrize(
    ("shape", "wire"),
    [
        # The guarded write, alone: one statement, one Sync. (With a client
        # id or an idempotency key, guarded by its being new too.)
        pytest.param("plain", (1, 1), id="one message, expected version"),
        pytest.param("tool result", (1, 1), id="a tool result for a call it saw made"),
        pytest.param("hundred", (1, 1), id="100 messages"),
        pytest.param("call and result", (1, 1), id="a call and its result together"),
        pytest.param("client id", (1, 1), id="with a client message id"),
        pytest.param("idempotency key", (1, 1), id="with an idempotency key"),
    ],
)
async def test_an_append_after_an_append_is_one_or_two_round_trips(
    storage: PostgresStorage, shape: str, wire: tuple[int, int]
) -> None:
    repository = Repository(storage)
    messages: list[Message] = {
        "plain": [user("hello")],
        "client id": [user("hello", client_message_id=str(uuid.uuid4()))],
        "tool result": [Message(role="tool", tool_call_id="call_1", content="a.txt")],
        "idempotency key": [user("hello")],
        "hundred": [user(f"m{i}") for i in range(100)],
        "call and result": [
            Message(role="assistant", tool_calls=(ToolCall(id="call_2", name="ls"),)),
            Message(role="tool", tool_call_id="call_2", content="b.txt"),
        ],
    }[shape]
    key = "k1" if shape == "idempotency key" else None

    async def opened() -> Callable[[], Awaitable[Any]]:
        """The append, ready to go, on a conversation that made a call."""
        conversation = await repository.create_conversation()
        call = ToolCall(id="call_1", name="ls")
        opened = await repository.append_messages(
            conversation.id, [Message(role="assistant", tool_calls=(call,))]
        )

        async def append() -> None:
            await repository.append_messages(
                conversation.id, messages, expected_version=opened.version, idempotency_key=key
            )

        return append

    # The connection prepares a statement shape at its first use, which
    # parses it apart (one Sync more): the same append elsewhere first.
    await (await opened())()
    append = await opened()

    assert await _wire(storage, append) == wire


async def test_a_first_append_reads_the_row_first(storage: PostgresStorage) -> None:
    """Nothing remembered yet (the conversation was only created): BEGIN,
    the lock | the write, COMMIT."""
    repository = Repository(storage)
    conversation = await repository.create_conversation()

    async def append() -> None:
        await repository.append_messages(conversation.id, [user("hello")])

    assert await _wire(storage, append) == (2, 4)


async def test_a_result_for_a_call_it_did_not_see_is_looked_up(
    storage: PostgresStorage, database_url: str
) -> None:
    """A call made by another process (another storage on the same database):
    its state is read under the lock, in two round trips."""
    repository = Repository(storage)
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [user("hello")])
    other = await PostgresStorage.connect(database_url, min_size=1, max_size=1)
    try:
        call = ToolCall(id="call_9", name="ls")
        await Repository(other).append_messages(
            conversation.id, [Message(role="assistant", tool_calls=(call,))]
        )
    finally:
        await other.close()

    async def append() -> None:
        result = Message(role="tool", tool_call_id="call_9", content="a.txt")
        await repository.append_messages(conversation.id, [result])

    assert await _wire(storage, append) == (2, 5)


async def test_a_retry_is_answered_from_the_first_attempt_and_writes_nothing(
    storage: PostgresStorage,
) -> None:
    repository = Repository(storage)
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [user("hi", client_message_id="m0")])
    message = user("hello", client_message_id="m1")
    first = await repository.append_messages(conversation.id, [message])

    async def retry() -> None:
        again = await repository.append_messages(conversation.id, [message])
        assert again.replayed
        assert again.messages == first.messages

    # Decided as a first attempt: the guarded write finds the id used and
    # writes nothing. Then BEGIN, the lock, the client-id lookup | COMMIT.
    # (A retry pays a round trip more so that every first attempt pays one
    # less.)
    assert await _wire(storage, retry) == (3, 5)


async def test_a_read_is_one_round_trip(storage: PostgresStorage) -> None:
    repository = Repository(storage)
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [user(f"m{i}") for i in range(10)])

    async def reads() -> None:
        await repository.visible_window(conversation.id)

    assert await _wire(storage, reads) == (1, 2)  # the conversation's row, the window


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda r, c: r.read_messages(c, order="desc", limit=5), id="last 5"),
        pytest.param(lambda r, c: r.recent_by_role(c, "user", 3), id="recent in window"),
        pytest.param(
            lambda r, c: r.recent_by_role(c, "user", 3, scope="history"), id="recent in history"
        ),
        pytest.param(lambda r, c: r.role_range(c, "user", 2, 4), id="role range"),
    ],
)
async def test_a_short_read_is_one_statement(
    storage: PostgresStorage, read: Callable[[Repository, str], Awaitable[Any]]
) -> None:
    """The tenant check rides in the read's own statement (sql.READABLE);
    only an empty answer reads the conversation's row as well."""
    repository = Repository(storage)
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [user(f"m{i}") for i in range(10)])
    empty = await repository.create_conversation()
    await read(repository, conversation.id)  # prepared: its first use parses it apart

    assert await _wire(storage, lambda: read(repository, conversation.id)) == (1, 1)
    assert await _wire(storage, lambda: read(repository, empty.id)) == (2, 2)


async def test_a_conversation_written_in_turns_by_two_processes_costs_no_extra_round_trip(
    storage: PostgresStorage, database_url: str
) -> None:
    """Two processes (two storages) appending in turns would each find the
    row moved at every optimistic append (one round trip wasted, then two):
    after two such strikes a storage reads the row first, and goes back to
    one round trip once the other writer stops."""
    repository = Repository(storage)
    conversation = await repository.create_conversation()
    other = await PostgresStorage.connect(database_url, min_size=1, max_size=1)

    async def append() -> None:
        await repository.append_messages(conversation.id, [user("mine")])

    try:
        theirs = Repository(other)
        for _ in range(3):
            await append()
            await theirs.append_messages(conversation.id, [user("theirs")])
        # BEGIN, the lock | the write, COMMIT: what it cost before remembering.
        assert await _wire(storage, append) == (2, 4)
    finally:
        await other.close()
    await append()  # nothing came between: the strikes wear off
    assert await _wire(storage, append) == (1, 1)


async def test_a_payload_is_one_round_trip_once_its_window_is_found(
    storage: PostgresStorage, database_url: str
) -> None:
    """The agent's window from the batch this storage last found it in
    (store.postgres.known_batches), with its profile and slots, in one
    statement (window_sql.ASSEMBLY). A window moved by another process is
    read again where it went: one round trip more, once."""
    repository = Repository(storage)
    plain = await repository.create_conversation()
    moved = await repository.create_conversation()
    for conversation in (plain, moved):
        await repository.append_messages(conversation.id, [user(f"m{i}") for i in range(10)])
    await repository.start_batch(moved.id, 6)
    # Each statement shape prepared (its first use parses it apart): the
    # moved window's first build reads batch 1 and then its own, and only
    # the second reads it with the profile.
    for conversation in (plain, moved, moved):
        await repository.assemble(conversation.id)

    assert await _wire(storage, lambda: repository.assemble(plain.id)) == (1, 1)
    assert await _wire(storage, lambda: repository.assemble(moved.id)) == (1, 1)
    other = await PostgresStorage.connect(database_url, min_size=1, max_size=1)
    try:
        await Repository(other).start_batch(moved.id, 8)
    finally:
        await other.close()
    # Not in the batch it was: read again there, and remembered.
    assert await _wire(storage, lambda: repository.assemble(moved.id)) == (2, 2)
    assert await _wire(storage, lambda: repository.assemble(moved.id)) == (1, 1)
    assert len((await repository.assemble(moved.id)).payload["messages"]) == 3
