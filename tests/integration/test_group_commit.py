"""Optimistic appends to different conversations, written together
(`store.postgres.group_commit`): appends that wait for a free statement go
out as one, and each still commits or fails by itself — a busy or moved
conversation is decided again alone, a refused append fails alone, and
nothing is written twice or lost."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from store.domain.conversation_keys import stream_id
from store.domain.errors import InvalidMessage
from store.domain.messages import Message, ToolCall
from store.postgres import PostgresStorage, group_commit
from store.postgres.group_commit import WRITERS, GuardedAppend, statement
from store.postgres.urls import libpq_url
from store.repository import Repository


def user(text: str) -> Message:
    return Message(role="user", content=text)


async def _remembered(repository: Repository, count: int) -> list[str]:
    """`count` conversations, each appended to once (the next append to
    each is decided from memory)."""
    ids = []
    for i in range(count):
        cid = (await repository.create_conversation()).id
        await repository.append_messages(cid, [user(f"first {i}")])
        ids.append(cid)
    return ids


async def _transactions(database_url: str, ids: list[str]) -> dict[str, set[int]]:
    """The transactions that wrote each conversation's events."""
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as conn:
        cursor = await conn.execute(
            "SELECT c.key, e.transaction_id::text::bigint FROM events AS e"
            " JOIN conversations AS c ON c.id = e.conversation_id"
            " WHERE c.key = ANY(%s) AND e.type = 'message_appended'",
            (ids,),
        )
        written: dict[str, set[int]] = {}
        for key, transaction in await cursor.fetchall():
            written.setdefault(key, set()).add(transaction)
    return written


async def test_appends_that_wait_together_are_one_transaction(
    repository: Repository, database_url: str
) -> None:
    ids = await _remembered(repository, 16)
    before = await _transactions(database_url, ids)

    appended = await asyncio.gather(
        *(repository.append_messages(cid, [user(f"second {i}")]) for i, cid in enumerate(ids))
    )

    assert [a.version for a in appended] == [3] * 16
    for i, cid in enumerate(ids):
        texts = [m.text for m in await repository.read_messages(cid)]
        assert texts == [f"first {i}", f"second {i}"]
    after = await _transactions(database_url, ids)
    second = set().union(*(after[cid] - before[cid] for cid in ids))
    # The first `WRITERS` went out alone, at once; the rest waited and went
    # out together (a few more transactions when a loaded machine lets some
    # writers in late, never one per append).
    assert len(second) <= len(ids) // 2


async def test_a_conversation_locked_elsewhere_does_not_hold_up_the_others(
    repository: Repository, database_url: str
) -> None:
    storage = repository.storage
    assert isinstance(storage, PostgresStorage)
    busy, *free = await _remembered(repository, 6)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as blocker:
        # Another transaction holds the busy conversation's row.
        await blocker.execute("SELECT 1 FROM conversations WHERE key = %s FOR UPDATE", (busy,))
        waiting = asyncio.create_task(repository.append_messages(busy, [user("busy")]))
        others = await asyncio.wait_for(
            asyncio.gather(*(repository.append_messages(cid, [user("free")]) for cid in free)),
            timeout=3,
        )
        assert not waiting.done()  # decided again, the way that waits for the lock
        await blocker.rollback()
        busy_append = await waiting

    assert [a.version for a in others] == [3] * 5
    assert busy_append.version == 3
    assert [m.text for m in await repository.read_messages(busy)] == ["first 0", "busy"]


async def test_an_append_the_database_refuses_fails_alone(
    repository: Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool call id used before is refused by the tool_calls key (the
    memory took it to be new): the statement it went out in wrote nothing,
    so the others in it go again alone and are written."""
    ids = await _remembered(repository, 6)
    bad = ids[2]
    call = ToolCall(id="c1", name="ls")
    await repository.append_messages(bad, [Message(role="assistant", tool_calls=(call,))])
    await repository.append_messages(bad, [Message(role="tool", tool_call_id="c1", content="ok")])
    version = (await repository.get_conversation(bad)).version
    statements: list[set[uuid.UUID]] = []

    def recorded(appends: list[GuardedAppend]) -> tuple[str, dict[str, Any]]:
        statements.append({a.conversation_id for a in appends})
        return statement(appends)

    monkeypatch.setattr(group_commit, "statement", recorded)

    # The first appends take the free statements; the rest, the bad one
    # first among them, wait and go out together.
    results = await asyncio.gather(
        *(
            repository.append_messages(
                cid,
                [Message(role="assistant", tool_calls=(call,))] if cid == bad else [user("more")],
            )
            for cid in ids
        ),
        return_exceptions=True,
    )

    bad_id = stream_id(repository.tenant, bad)
    assert any(bad_id in sent and len(sent) > 1 for sent in statements)
    error = results.pop(2)
    assert isinstance(error, InvalidMessage)
    assert "c1" in str(error)
    assert [getattr(r, "version", None) for r in results] == [3] * 5
    assert (await repository.get_conversation(bad)).version == version
    for cid in ids:
        if cid != bad:
            assert [m.text for m in await repository.read_messages(cid)][-1] == "more"


async def test_many_writers_of_many_conversations_lose_nothing(repository: Repository) -> None:
    ids = await _remembered(repository, 12)
    per_writer = 15

    async def writer(cid: str, name: str) -> None:
        for i in range(per_writer):
            await repository.append_messages(cid, [user(f"{name}{i}")])

    # Two writers per conversation: one's memory is often out of date.
    await asyncio.gather(*(writer(cid, f"{w}-") for cid in ids for w in "ab"))

    for cid in ids:
        history = await repository.read_messages(cid, limit=1000)
        texts = [m.text for m in history]
        assert len(texts) == len(set(texts)) == 1 + 2 * per_writer
        assert [m.seq for m in history] == list(range(1, 2 + 2 * per_writer))
        assert (await repository.get_conversation(cid)).version == 2 + 2 * per_writer


def _guarded(cid: uuid.UUID) -> GuardedAppend:
    """An append of one event to `cid` at version 2."""
    head = {"cid": cid, "expected": 2, "version": 3, "next_seq": 3, "current_batch": 1}
    head |= {"role_counts": [0, 2, 0, 0], "key": None, "client_ids": None}
    return GuardedAppend(
        conversation_id=cid,
        head=head,
        events=[{"cid": cid, "version": 3, "type": "message_appended", "data": {}}],
        messages=[],
        calls=[],
        answers=[],
        request=None,
    )


def test_every_append_in_a_statement_names_its_conversation() -> None:
    """The statement's rows carry their conversation: two appends with the
    same versions and sequence numbers write different conversations."""
    a, b = uuid.uuid4(), uuid.uuid4()
    text, params = statement([_guarded(a), _guarded(b)])

    assert "FOR NO KEY UPDATE SKIP LOCKED" in text
    assert str(a) in params["events"]
    assert str(b) in params["events"]
    assert set(params) == {"heads", "events"}


def test_a_lone_append_names_its_head_by_parameters() -> None:
    """One conversation's append locks and updates its row by the primary
    key, its head as parameters; its rows still name it."""
    a = uuid.uuid4()
    text, params = statement([_guarded(a)])

    assert "WHERE id = %(cid)s FOR NO KEY UPDATE SKIP LOCKED" in text
    assert "heads" not in params
    assert params["cid"] == a
    assert params["expected"] == 2
    assert str(a) in params["events"]


@pytest.mark.parametrize("writers", [1, WRITERS])
async def test_appends_are_answered_whatever_the_statements_in_flight(
    database_url: str, writers: int
) -> None:
    storage = await PostgresStorage.connect(database_url, min_size=1, max_size=4, writers=writers)
    try:
        repository = Repository(storage)
        ids = await _remembered(repository, 8)
        appended = await asyncio.gather(
            *(repository.append_messages(cid, [user("x")]) for cid in ids for _ in range(3))
        )
        assert sorted(a.version for a in appended) == sorted([3, 4, 5] * 8)
    finally:
        await storage.close()
