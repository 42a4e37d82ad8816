"""Retries, against a scripted service (httpx's MockTransport): a busy
conversation (409 `ConversationBusy`) and an unavailable database (503) are
retried after `Retry-After`, an append's retries carry its one idempotency
key, other errors are not retried, and after the last try the error is the
library's, with its `retry_after`."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from store.client import AsyncConvoClient, ConvoClient, RetryPolicy
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationBusy,
    StorageError,
    StorageUnavailable,
)

CONVERSATION = {
    "id": "c",
    "tenant": "default",
    "version": 2,
    "current_batch": 1,
    "next_seq": 2,
    "archived": False,
    "started_at": "2026-11-27T12:00:00Z",
    "metadata": {},
}
APPENDED = {"conversation_id": "c", "version": 2, "messages": [], "replayed": False}


def busy(retry_after: str | None = "2") -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(
        409,
        headers={"Content-Type": "application/problem+json", **headers},
        json={
            "type": "ConversationBusy",
            "title": "The conversation is busy",
            "status": 409,
            "detail": "conversation c is busy: another writer holds it; retry after 2 s",
            **({"retry_after": int(retry_after)} if retry_after and retry_after.isdigit() else {}),
        },
    )


def unavailable() -> httpx.Response:
    return httpx.Response(
        503,
        headers={"Content-Type": "application/problem+json", "Retry-After": "1"},
        json={
            "type": "StorageUnavailable",
            "title": "The database is unavailable",
            "status": 503,
            "detail": "storage unavailable: the database cannot be reached; retry after 1 s",
            "retry_after": 1,
        },
    )


class Script:
    """Answers requests in turn, and keeps them."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def keys(self) -> list[str | None]:
        return [r.headers.get("Idempotency-Key") for r in self.requests]


def clients(
    script: Script, waits: list[float], **policy: Any
) -> tuple[AsyncConvoClient, ConvoClient]:
    async def record(seconds: float) -> None:
        waits.append(seconds)

    retry = RetryPolicy(**policy)
    return (
        AsyncConvoClient(
            "http://convo.test",
            transport=httpx.MockTransport(script),
            retry=retry,
            sleep=record,
        ),
        ConvoClient(
            "http://convo.test",
            transport=httpx.MockTransport(script),
            retry=retry,
            sleep=waits.append,
        ),
    )


MESSAGE = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_busy_append_is_retried_after_retry_after_with_its_one_key(sync: bool) -> None:
    script = Script(busy("2"), unavailable(), httpx.Response(201, json=APPENDED))
    waits: list[float] = []
    async_client, sync_client = clients(script, waits)
    if sync:
        appended = sync_client.append_messages("c", MESSAGE)
    else:
        appended = await async_client.append_messages("c", MESSAGE)
    assert appended.version == 2
    assert len(script.requests) == 3
    keys = script.keys()
    assert keys[0] is not None
    assert keys == [keys[0]] * 3  # one append, one key, whatever the tries
    assert waits[0] >= 2  # Retry-After: 2
    assert waits[1] >= 1
    assert len({r.content for r in script.requests}) == 1  # the same body each time
    assert json.loads(script.requests[0].content)["messages"][0]["content"] == "hi"


async def test_each_append_has_a_key_of_its_own_and_a_named_one_is_sent() -> None:
    script = Script(*(httpx.Response(201, json=APPENDED) for _ in range(3)))
    client, _ = clients(script, [])
    await client.append_messages("c", MESSAGE)
    await client.append_messages("c", MESSAGE)
    await client.append_messages("c", MESSAGE, idempotency_key="turn-7")
    first, second, named = script.keys()
    assert first != second
    assert named == "turn-7"
    script = Script(httpx.Response(201, json=APPENDED))
    unkeyed = AsyncConvoClient(
        "http://convo.test", transport=httpx.MockTransport(script), idempotency_keys=False
    )
    await unkeyed.append_messages("c", MESSAGE)
    assert script.keys() == [None]


async def test_after_the_last_try_the_error_is_the_librarys() -> None:
    script = Script(busy("1"), busy("1"), busy("1"))
    waits: list[float] = []
    client, _ = clients(script, waits, attempts=3)
    with pytest.raises(ConversationBusy) as gave_up:
        await client.get_conversation("c")
    assert gave_up.value.retry_after == 1
    assert len(script.requests) == 3
    assert len(waits) == 2

    script = Script(unavailable(), unavailable())
    client, _ = clients(script, [], attempts=2)
    with pytest.raises(StorageUnavailable):
        await client.get_conversation("c")


def conflict() -> httpx.Response:
    return httpx.Response(
        409,
        headers={"Content-Type": "application/problem+json"},
        json={
            "type": "ConcurrencyConflict",
            "title": "The conversation is not at the expected version",
            "status": 409,
            "detail": "concurrency conflict on conversation c: expected 1, but it is at version 2",
            "expected": 1,
            "actual": 2,
        },
    )


def storage_error() -> httpx.Response:
    return httpx.Response(
        500,
        json={
            "type": "StorageError",
            "title": "The database failed",
            "status": 500,
            "detail": "the database failed to carry out the request",
        },
    )


@pytest.mark.parametrize(
    ("answer", "error"),
    [(conflict, ConcurrencyConflict), (storage_error, StorageError)],
    ids=["stale-version", "storage-error"],
)
async def test_other_errors_are_not_retried(
    answer: Callable[[], httpx.Response], error: type[Exception]
) -> None:
    script = Script(answer(), httpx.Response(201, json=APPENDED))
    client, _ = clients(script, [])
    with pytest.raises(error):
        await client.append_messages("c", MESSAGE, expected_version=1)
    assert len(script.requests) == 1


async def test_a_lost_connection_is_retried_only_where_a_repeat_is_safe() -> None:
    refused = httpx.ConnectError("refused")
    lost = httpx.ReadError("connection reset")
    script = Script(refused, lost, httpx.Response(201, json=APPENDED))
    client, _ = clients(script, [], backoff=0)
    await client.append_messages("c", MESSAGE)  # keyed: a repeat is answered, not stored
    assert len(script.requests) == 3

    script = Script(lost, httpx.Response(200, json=CONVERSATION))
    client, _ = clients(script, [], backoff=0)
    with pytest.raises(httpx.ReadError):
        await client.update_slot("c", "useful_info", "x")  # might have been stored
    assert len(script.requests) == 1


def test_retry_after_as_a_date_and_the_longest_wait() -> None:
    later = datetime.now(UTC) + timedelta(seconds=30)
    script = Script(busy(format_datetime(later, usegmt=True)), busy("3600"), busy(None))
    waits: list[float] = []
    _, client = clients(script, waits, attempts=4, max_wait=60)
    script.answers.append(httpx.Response(200, json=CONVERSATION))
    assert client.get_conversation("c").version == 2
    assert 25 <= waits[0] <= 30
    assert waits[1] == 60  # no wait is longer than max_wait
    assert 1 <= waits[2] <= 60  # ConversationBusy without a Retry-After: its default


def test_a_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
