"""Live tails are woken by LISTEN/NOTIFY, sent after writes commit and never
inside a writer's transaction (store.postgres.feed_signal)."""

from __future__ import annotations

import asyncio

import pytest

from store.domain.messages import Message
from store.postgres import PostgresStorage, feed_signal
from store.repository import Repository

pytestmark = pytest.mark.integration


async def test_a_commit_wakes_a_waiting_tail(
    storage: PostgresStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the safety re-read, only a notification can end this wait.
    monkeypatch.setattr(feed_signal, "SAFETY_INTERVAL", 3600.0)
    repository = Repository(storage)
    cid = (await repository.create_conversation()).id
    # Listening first; the listener's start wakes once (what committed before).
    await asyncio.wait_for(storage.wait_for_feed(3600.0), timeout=30)
    signal = storage._feed_signal
    if signal._notifier is not None:
        await signal._notifier  # the create's notification, sent
    await asyncio.sleep(0.2)  # …and delivered, so it cannot end the wait below

    waiting = asyncio.create_task(storage.wait_for_feed(3600.0))
    await asyncio.sleep(0)
    assert not waiting.done()
    await repository.append_messages(cid, [Message(role="user", content="wake up")])

    await asyncio.wait_for(waiting, timeout=30)


async def test_a_write_that_fails_sends_no_notification(storage: PostgresStorage) -> None:
    repository = Repository(storage)
    with pytest.raises(Exception, match="does not exist"):
        await repository.append_messages("missing", [Message(role="user", content="x")])
    assert storage._feed_signal._notifier is None
