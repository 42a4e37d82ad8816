"""The event log against real PostgreSQL: appends, expected versions,
idempotency, stream reads."""

from __future__ import annotations

import uuid

import pytest

from store.errors import ConcurrencyConflict, ConversationNotFound, IdempotencyConflict
from store.log import EventLog
from store.records import NewEvent, StreamState


def ev(n: int, client_id: str | None = None) -> NewEvent:
    return NewEvent(type="test_event", data={"n": n}, client_id=client_id)


async def test_append_then_read_stream(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    result = await event_log.append(cid, [ev(1), ev(2)], expected_version=StreamState.NO_STREAM)
    assert (result.first_version, result.last_version) == (1, 2)
    assert len(result.positions) == 2
    assert not result.replayed

    stream = await event_log.read_stream(cid)
    assert [e.data["n"] for e in stream] == [1, 2]
    assert [e.version for e in stream] == [1, 2]
    assert await event_log.stream_version(cid) == 2


async def test_read_stream_from_version_with_limit(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    await event_log.append(cid, [ev(i) for i in range(1, 11)])
    part = await event_log.read_stream(cid, from_version=4, limit=3)
    assert [e.version for e in part] == [4, 5, 6]


async def test_exact_expected_version_mismatch_names_both_versions(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    await event_log.append(cid, [ev(1), ev(2)])
    with pytest.raises(ConcurrencyConflict) as caught:
        await event_log.append(cid, [ev(3)], expected_version=1)
    assert caught.value.expected == 1
    assert caught.value.actual == 2
    assert "expected 1" in str(caught.value)
    assert "version 2" in str(caught.value)
    assert await event_log.stream_version(cid) == 2


async def test_no_stream_on_existing_conversation_conflicts(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    await event_log.append(cid, [ev(1)])
    with pytest.raises(ConcurrencyConflict, match="no stream"):
        await event_log.append(cid, [ev(2)], expected_version=StreamState.NO_STREAM)


async def test_exact_version_on_missing_conversation_conflicts(event_log: EventLog) -> None:
    with pytest.raises(ConcurrencyConflict) as caught:
        await event_log.append(uuid.uuid4(), [ev(1)], expected_version=3)
    assert caught.value.actual is None


async def test_expected_version_zero_starts_a_stream(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    result = await event_log.append(cid, [ev(1)], expected_version=0)
    assert result.last_version == 1


async def test_empty_append_is_refused(event_log: EventLog) -> None:
    with pytest.raises(ValueError, match="at least one event"):
        await event_log.append(uuid.uuid4(), [])


async def test_idempotency_key_retry_returns_original_and_writes_nothing(
    event_log: EventLog,
) -> None:
    cid = uuid.uuid4()
    first = await event_log.append(cid, [ev(1), ev(2)], idempotency_key="req-1", expected_version=0)
    retry = await event_log.append(cid, [ev(1), ev(2)], idempotency_key="req-1", expected_version=0)
    assert retry.replayed
    assert retry.positions == first.positions
    assert (retry.first_version, retry.last_version) == (1, 2)
    assert await event_log.stream_version(cid) == 2
    assert len(await event_log.read_stream(cid)) == 2


async def test_idempotency_key_with_different_content_is_refused(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    await event_log.append(cid, [ev(1)], idempotency_key="req-1")
    with pytest.raises(IdempotencyConflict, match="req-1"):
        await event_log.append(cid, [ev(99)], idempotency_key="req-1")
    assert [e.data for e in await event_log.read_stream(cid)] == [{"n": 1}]


async def test_client_ids_make_a_retry_idempotent(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    first = await event_log.append(cid, [ev(1, "m1"), ev(2, "m2")])
    retry = await event_log.append(cid, [ev(1, "m1"), ev(2, "m2")])
    assert retry.replayed
    assert retry.positions == first.positions
    assert len(await event_log.read_stream(cid)) == 2


async def test_client_id_reused_for_other_content_is_refused(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    await event_log.append(cid, [ev(1, "m1")])
    with pytest.raises(IdempotencyConflict, match="m1"):
        await event_log.append(cid, [ev(2, "m1")])


async def test_partially_known_client_ids_are_refused(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    await event_log.append(cid, [ev(1, "m1")])
    with pytest.raises(IdempotencyConflict, match="some client ids"):
        await event_log.append(cid, [ev(1, "m1"), ev(2, "m2")])
    assert len(await event_log.read_stream(cid)) == 1


async def test_other_tenant_cannot_append_or_see(event_log: EventLog) -> None:
    cid = uuid.uuid4()
    await event_log.append(cid, [ev(1)], tenant="acme")
    with pytest.raises(ConversationNotFound):
        await event_log.append(cid, [ev(2)], tenant="globex")
    assert await event_log.stream_version(cid) == 1


async def test_feed_returns_appended_events_in_order(event_log: EventLog) -> None:
    start = await event_log.feed_head()
    a, b = uuid.uuid4(), uuid.uuid4()
    await event_log.append(a, [ev(1), ev(2)])
    await event_log.append(b, [ev(3)])
    feed = await event_log.read_feed(start)
    assert [(e.conversation_id, e.data["n"]) for e in feed] == [(a, 1), (a, 2), (b, 3)]
    assert await event_log.read_feed(feed[-1].feed_position) == []
