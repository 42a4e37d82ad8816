"""Contract: concurrent asyncio writers of one conversation. Optimistic
concurrency loses nothing and duplicates nothing; idempotent retries racing
each other write once. For the fake this is its concurrency-safety test."""

from __future__ import annotations

import asyncio

import pytest

from store.domain.commands import Head
from store.domain.errors import ConcurrencyConflict
from store.memory import InMemoryRepository
from store.memory.write_session import MemoryWriteSession
from store.repository import Appended, Repository
from tests.contract.conftest import seqs, user

WRITERS = 16


async def test_writers_with_expected_versions_lose_nothing(
    repository: Repository, conversation_id: str
) -> None:
    conflicts: list[ConcurrencyConflict] = []

    async def writer(n: int) -> Appended:
        while True:
            version = (await repository.get_conversation(conversation_id)).version
            await asyncio.sleep(0)  # let every writer read the same version first
            try:
                return await repository.append_messages(
                    conversation_id, [user(f"writer {n}")], expected_version=version
                )
            except ConcurrencyConflict as conflict:
                conflicts.append(conflict)

    results = await asyncio.gather(*(writer(n) for n in range(WRITERS)))

    window = await repository.visible_window(conversation_id)
    assert seqs(window) == list(range(1, WRITERS + 1))
    assert sorted(m.text for m in window) == sorted(f"writer {n}" for n in range(WRITERS))
    assert sorted(r.version for r in results) == list(range(2, WRITERS + 2))
    assert (await repository.get_conversation(conversation_id)).version == WRITERS + 1
    assert conflicts, "writers that read a stale version must be refused"
    assert all(c.actual is not None and c.actual > c.expected for c in conflicts)


async def test_racing_retries_with_one_idempotency_key_write_once(
    repository: Repository, conversation_id: str
) -> None:
    request = [user("hi"), user("again")]

    results = await asyncio.gather(
        *(
            repository.append_messages(conversation_id, request, idempotency_key="turn-1")
            for _ in range(WRITERS)
        )
    )

    assert sum(not r.replayed for r in results) == 1
    assert {tuple(seqs(r.messages)) for r in results} == {(1, 2)}
    assert seqs(await repository.visible_window(conversation_id)) == [1, 2]
    assert (await repository.get_conversation(conversation_id)).version == 3


async def test_concurrent_batch_operations_and_appends_stay_consistent(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(conversation_id, [user(f"m{i}") for i in range(4)])

    await asyncio.gather(
        *(repository.append_messages(conversation_id, [user(f"a{i}")]) for i in range(8)),
        *(repository.truncate(conversation_id, keep_last=3) for _ in range(4)),
    )

    conversation = await repository.get_conversation(conversation_id)
    assert conversation.version == 1 + 4 + 8 + 4
    assert conversation.current_batch == 5
    assert conversation.next_seq == 13
    history = await repository.count_by_role(conversation_id, scope="history")
    assert history["user"] == 12
    # Every batch's window is ordered and free of duplicates.
    for batch in range(1, 6):
        window = seqs(await repository.visible_window(conversation_id, batch=batch))
        assert window == sorted(set(window))


async def test_the_fake_serialises_writers_that_suspend_while_deciding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fake's lock, not the absence of awaits, is what keeps writers
    apart: make every decision yield to the loop and nothing may change."""
    original_head = MemoryWriteSession.head

    async def yielding_head(state: MemoryWriteSession) -> Head:
        head = await original_head(state)
        await asyncio.sleep(0)  # another writer runs while this head is in hand
        return head

    monkeypatch.setattr(MemoryWriteSession, "head", yielding_head)
    repository = InMemoryRepository()
    conversation = await repository.create_conversation()

    await asyncio.gather(
        *(repository.append_messages(conversation.id, [user(f"a{i}")]) for i in range(WRITERS)),
        *(repository.clear(conversation.id) for _ in range(4)),
    )

    after = await repository.get_conversation(conversation.id)
    assert (after.version, after.next_seq, after.current_batch) == (1 + WRITERS + 4, 17, 5)
    assert [b.number for b in await repository.batches(conversation.id)] == [1, 2, 3, 4, 5]
    history = await repository.role_range(conversation.id, "user", 1, WRITERS)
    assert seqs(history) == list(range(1, WRITERS + 1))
