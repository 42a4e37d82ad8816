"""Contract: pinning a message (`Repository.pin_message`, `StoredMessage.pinned`)."""

from __future__ import annotations

import pytest

from store.domain.errors import ConcurrencyConflict, InvalidOperation
from store.repository import Repository
from tests.contract.conftest import Snapshot, append_texts


async def test_a_pinned_message_reads_pinned_everywhere_until_unpinned(
    repository: Repository, conversation_id: str
) -> None:
    cid = conversation_id
    await append_texts(repository, cid, "U", "A", "U")

    version = await repository.pin_message(cid, 2)

    assert version == 5
    assert [m.pinned for m in await repository.visible_window(cid)] == [False, True, False]
    assert [m.pinned for m in await repository.read_messages(cid)] == [False, True, False]
    await repository.start_batch(cid, 3, retain=[2])
    assert [(m.seq, m.pinned) for m in await repository.visible_window(cid)] == [
        (2, True),
        (3, False),
    ]
    assert await repository.pin_message(cid, 2, pinned=False) == 7
    assert not any(m.pinned for m in await repository.read_messages(cid))


async def test_pinning_what_is_pinned_writes_nothing(
    repository: Repository, conversation_id: str
) -> None:
    cid = conversation_id
    await append_texts(repository, cid, "U")
    assert await repository.pin_message(cid, 1) == 3
    before = await Snapshot.take(repository, cid)

    assert await repository.pin_message(cid, 1) == 3
    assert await repository.pin_message(cid, 1, True, expected_version=3) == 3
    assert await Snapshot.take(repository, cid) == before


async def test_a_pin_is_refused_for_a_missing_message_or_a_stale_version(
    repository: Repository, conversation_id: str
) -> None:
    cid = conversation_id
    await append_texts(repository, cid, "U")
    before = await Snapshot.take(repository, cid)

    with pytest.raises(InvalidOperation, match="no message with seq 9"):
        await repository.pin_message(cid, 9)
    with pytest.raises(InvalidOperation, match="seq must be"):
        await repository.pin_message(cid, 0)
    with pytest.raises(ConcurrencyConflict):
        await repository.pin_message(cid, 1, expected_version=1)
    assert await Snapshot.take(repository, cid) == before
