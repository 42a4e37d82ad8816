"""Contract: a window moved by another process is read where it is now.

A storage may read an agent's whole window from the batch it last found it
in (PostgreSQL: `store.postgres.known_batches`, one round trip with the
conversation's row); another process's batch operation moves the window on
meanwhile. The next read, of the window or of the payload, shows the
window as it is now: never the batch it left. On PostgreSQL the other
process is a second storage on the same database; in memory, the same
storage (nothing there is remembered between reads).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hosting.settings import Settings
from store.domain.errors import ConversationDeleted
from store.memory import MemoryStorage
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.contract.conftest import append_texts, seqs


@pytest.fixture
async def elsewhere(
    repository: Repository, request: pytest.FixtureRequest
) -> AsyncIterator[Repository]:
    """The repository's tenant, through another process's storage."""
    if isinstance(repository.storage, MemoryStorage):
        yield repository
        return
    settings: Settings = request.getfixturevalue("settings")
    url: str = request.getfixturevalue("contract_database_url")
    other = await PostgresStorage.connect(url, options=settings.connection_options(), max_size=1)
    yield Repository(other, tenant=repository.tenant)
    await other.close()


async def _payload_texts(repository: Repository, conversation_id: str) -> list[str]:
    assembly = await repository.assemble(conversation_id)
    return [m["content"] for m in assembly.payload["messages"]]


async def test_each_read_shows_the_window_another_process_left(
    repository: Repository, elsewhere: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A", "U", "A")
    assert seqs(await repository.visible_window(conversation_id, agent_id="main")) == [
        1, 2, 3, 4, 5, 6
    ]  # fmt: skip
    assert len(await _payload_texts(repository, conversation_id)) == 6

    # Compacted elsewhere: this storage read the window in batch 1 last.
    await elsewhere.start_batch(conversation_id, 5)
    assert seqs(await repository.visible_window(conversation_id, agent_id="main")) == [5, 6]
    assert await _payload_texts(repository, conversation_id) == ["U5", "A6"]

    # Moved again elsewhere, from the batch this storage found it in last.
    await elsewhere.rollback_to_batch(conversation_id, 1)
    assert await _payload_texts(repository, conversation_id) == [
        "U1", "A2", "U3", "A4", "U5", "A6"
    ]  # fmt: skip
    await elsewhere.start_batch(conversation_id, 6)
    await append_texts(elsewhere, conversation_id, "U")
    assert seqs(await repository.visible_window(conversation_id, agent_id="main")) == [6, 7]
    assert await _payload_texts(repository, conversation_id) == ["A6", "U7"]


async def test_a_window_moved_by_this_process_is_read_where_it_went(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.start_batch(conversation_id, 3)
    assert await _payload_texts(repository, conversation_id) == ["U3", "A4"]
    await repository.rollback_to_batch(conversation_id, 1)
    assert await _payload_texts(repository, conversation_id) == ["U1", "A2", "U3", "A4"]
    await repository.start_batch(conversation_id, 4)
    assert seqs(await repository.visible_window(conversation_id, agent_id="main")) == [4]


async def test_a_conversation_deleted_elsewhere_is_not_read_from_a_remembered_batch(
    repository: Repository, elsewhere: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.start_batch(conversation_id, 3)
    assert await _payload_texts(repository, conversation_id) == ["U3", "A4"]
    await elsewhere.delete(conversation_id)
    with pytest.raises(ConversationDeleted):
        await repository.assemble(conversation_id)
    with pytest.raises(ConversationDeleted):
        await repository.visible_window(conversation_id, agent_id="main")


async def test_another_agents_window_moved_elsewhere(
    repository: Repository, elsewhere: Repository, conversation_id: str
) -> None:
    """Each agent's window is remembered apart: moving one moves no other."""
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.start_batch(conversation_id, 3, agent_id="helper")
    assert await repository.visible_window(conversation_id, agent_id="helper") == []
    assert seqs(await repository.visible_window(conversation_id, agent_id="main")) == [1, 2, 3, 4]
    await elsewhere.start_batch(conversation_id, 4)
    assert seqs(await repository.visible_window(conversation_id, agent_id="main")) == [4]
    assert await repository.visible_window(conversation_id, agent_id="helper") == []
