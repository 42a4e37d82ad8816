"""Contract: an append decided on a stale head is decided again.

A storage may decide an append on what it remembers of the conversation
(PostgreSQL: its last write there, one round trip) and raise `StaleHead`
when another writer moved the row on meanwhile; the repository then
decides again on the row read under its lock. Here another writer comes
between on both backends: on PostgreSQL a second storage (another
process), in memory the same storage told to report the stale head
(`MemoryStorage.report_stale_heads`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import pytest

from hosting.settings import Settings
from store.domain.errors import ConcurrencyConflict
from store.memory import MemoryStorage
from store.postgres import PostgresStorage
from store.repository import Repository
from store.repository.port import StaleHead, Storage, WriteSession
from tests.contract.conftest import seqs, user


class CountingStaleHeads:
    """The storage under test, counting the writes that ended in `StaleHead`."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.stale = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.storage, name)

    @asynccontextmanager
    async def writing(self, *args: Any, **kwargs: Any) -> AsyncIterator[WriteSession]:
        try:
            async with self.storage.writing(*args, **kwargs) as session:
                yield session
        except StaleHead:
            self.stale += 1
            raise


AnotherWriter = Callable[[str], Awaitable[None]]


@pytest.fixture
async def another_writer(
    repository: Repository, request: pytest.FixtureRequest
) -> AsyncIterator[AnotherWriter]:
    """Appends a message to a conversation behind the repository's storage's back."""
    storage = repository.storage
    if isinstance(storage, MemoryStorage):
        memory = storage

        async def in_memory(conversation_id: str) -> None:
            await repository.append_messages(conversation_id, [user("from elsewhere")])
            memory.report_stale_heads(1)

        yield in_memory
        return
    settings: Settings = request.getfixturevalue("settings")
    url: str = request.getfixturevalue("contract_database_url")
    other = await PostgresStorage.connect(url, options=settings.connection_options(), max_size=1)

    async def elsewhere(conversation_id: str) -> None:
        await Repository(other, tenant=repository.tenant).append_messages(
            conversation_id, [user("from elsewhere")]
        )

    yield elsewhere
    await other.close()


@dataclass(frozen=True)
class StaleConversation:
    """A conversation this repository appended to (so its storage may
    remember the head), then another writer did."""

    repository: Repository
    counting: CountingStaleHeads
    conversation_id: str


@pytest.fixture
async def stale(repository: Repository, another_writer: AnotherWriter) -> StaleConversation:
    counting = CountingStaleHeads(repository.storage)
    repository = Repository(cast(Storage, counting), tenant=repository.tenant)
    conversation_id = (await repository.create_conversation()).id
    await repository.append_messages(conversation_id, [user("one")])  # remembered here
    await another_writer(conversation_id)
    return StaleConversation(repository, counting, conversation_id)


async def test_an_append_on_a_stale_head_is_decided_again(stale: StaleConversation) -> None:
    appended = await stale.repository.append_messages(
        stale.conversation_id, [user("three")], expected_version=3
    )

    assert stale.counting.stale == 1
    assert appended.version == 4
    assert seqs(appended.messages) == [3]
    history = await stale.repository.read_messages(stale.conversation_id)
    assert [m.content for m in history] == ["one", "from elsewhere", "three"]


async def test_a_stale_expectation_is_still_refused_after_deciding_again(
    stale: StaleConversation,
) -> None:
    with pytest.raises(ConcurrencyConflict):
        # Expects the version it last wrote: the other writer's message is news.
        await stale.repository.append_messages(
            stale.conversation_id, [user("two")], expected_version=2
        )

    assert stale.counting.stale == 1
    assert (await stale.repository.get_conversation(stale.conversation_id)).version == 3


async def test_an_idempotent_append_on_a_stale_head_writes_once(stale: StaleConversation) -> None:
    appended = await stale.repository.append_messages(
        stale.conversation_id, [user("again")], idempotency_key=f"k-{uuid.uuid4().hex}"
    )

    assert stale.counting.stale == 1
    history = await stale.repository.read_messages(stale.conversation_id)
    assert [m.content for m in history] == ["one", "from elsewhere", "again"]
    assert appended.version == 4
