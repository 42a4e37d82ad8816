"""Every write reads what it decides on inside its own transaction: on a
pool of ONE connection a write that asked the pool for a second one while
holding the first (and the stream row's lock) would wait for itself until
the pool's timeout. The writes that read before deciding run here."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from hosting.settings import Settings
from store.postgres import PostgresStorage
from store.repository import Repository


@pytest_asyncio.fixture
async def one_connection(database_url: str, settings: Settings) -> AsyncIterator[Repository]:
    storage = await PostgresStorage.connect(
        database_url,
        options=settings.connection_options(),
        min_size=1,
        max_size=1,
        timeout=2.0,
    )
    yield Repository(storage)
    await storage.close()


async def test_update_metadata_reads_inside_its_own_write(one_connection: Repository) -> None:
    repository = one_connection
    conversation = await repository.create_conversation(metadata={"team": "a", "keep": 1})

    updated = await repository.update_metadata(conversation.id, {"team": "b", "new": True})

    assert updated.metadata == {"team": "b", "keep": 1, "new": True}
    assert updated.version == 2
    unchanged = await repository.update_metadata(conversation.id, {"team": "b"})
    assert unchanged.version == 2  # a patch that changes nothing writes nothing


async def test_the_other_writes_need_one_connection(one_connection: Repository) -> None:
    repository = one_connection
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [{"role": "user", "content": "hi"}])
    await repository.pin_message(conversation.id, 1)
    await repository.replace(conversation.id, 1, "hello")
    await repository.clear(conversation.id)
    fork = await repository.fork(conversation.id)
    await repository.archive(fork.id)
    await repository.delete(fork.id)

    assert (await repository.get_conversation(conversation.id)).version == 5
