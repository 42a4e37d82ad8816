"""Live tails are woken by LISTEN/NOTIFY: at most one notification per
NOTIFY_DELAY, carried by an append's own statement when one goes out, else
sent on its own after the commit (store.postgres.feed_signal)."""

from __future__ import annotations

import asyncio
import tempfile

import psycopg
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


async def test_an_append_carries_the_notification_in_its_own_statement(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append decided from memory, the first for NOTIFY_DELAY, wakes a
    waiting tail with nothing on the wire but its own statement."""
    monkeypatch.setattr(feed_signal, "SAFETY_INTERVAL", 3600.0)
    # One connection, so the traced one is the one every write uses.
    storage = await PostgresStorage.connect(database_url, min_size=1, max_size=1)
    try:
        repository = Repository(storage)
        cid = (await repository.create_conversation()).id
        # The first append reads the row under the lock; the next ones are
        # decided from memory (the first of them prepares the statement).
        for text in ("hello", "again"):
            await repository.append_messages(cid, [Message(role="user", content=text)])
        await asyncio.wait_for(storage.wait_for_feed(3600.0), timeout=30)  # listening
        await asyncio.sleep(0.2)  # the notifications so far sent and delivered

        waiting = asyncio.create_task(storage.wait_for_feed(3600.0))
        await asyncio.sleep(0)
        assert not waiting.done()
        with tempfile.TemporaryFile("w+") as trace:
            async with storage.pool.connection() as conn:
                conn.pgconn.trace(trace.fileno())
                conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            await repository.append_messages(cid, [Message(role="user", content="wake up")])
            await asyncio.wait_for(waiting, timeout=30)
            await asyncio.sleep(4 * feed_signal.NOTIFY_DELAY)  # a NOTIFY of its own would be sent
            async with storage.pool.connection() as conn:
                conn.pgconn.untrace()
            trace.seek(0)
            sent = [line.rstrip("\n").split("\t")[2] for line in trace if line.startswith("F")]
        assert (sent.count("Sync"), sent.count("Bind")) == (1, 1)
    finally:
        await storage.close()
