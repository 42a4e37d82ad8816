"""`convo export` and `convo tail` against a real database, in-process (CliRunner).

The commands run their own event loop (`asyncio.run`), so these tests are
synchronous and write what they need through a storage of their own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from convo import app
from convo.export import parse_since
from store.domain.feed_vector import FeedVector
from store.domain.messages import Message
from store.domain.records import FeedPosition
from store.postgres import PostgresStorage
from store.repository import Repository


def convo(database_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"DATABASE_URL": database_url})
    return result.exit_code, result.stdout, result.stderr


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def write(database_url: str, steps: Callable[[PostgresStorage], Awaitable[Any]]) -> Any:
    """Run `steps` on a storage of `database_url`, in an event loop of its own."""

    async def run() -> Any:
        storage = await PostgresStorage.connect(database_url)
        try:
            return await steps(storage)
        finally:
            await storage.close()

    return asyncio.run(run())


async def conversation_with(storage: PostgresStorage, tenant: str, *texts: str) -> str:
    repository = Repository(storage, tenant=tenant)
    cid = (await repository.create_conversation()).id
    if texts:
        await repository.append_messages(cid, [Message(role="user", content=t) for t in texts])
    return cid


def test_export_one_conversation_to_stdout_and_to_a_file(database_url: str, tmp_path: Path) -> None:
    async def steps(storage: PostgresStorage) -> str:
        acme = Repository(storage, tenant="acme")
        cid = (await acme.create_conversation()).id
        await acme.append_messages(
            cid,
            [
                Message(role="user", content="hi"),
                Message(role="system", kind="reminder", content="TODO changed"),
                Message(role="assistant", content="hello"),
            ],
        )
        return cid

    cid = write(database_url, steps)
    code, out, err = convo(database_url, "export", "--tenant", "acme", "--conversation", str(cid))
    assert code == 0, err
    lines = jsonl(out)
    assert [(m["seq"], m["type"]) for m in lines] == [
        (1, "user"),
        (2, "reminder"),
        (3, "assistant"),
    ]
    assert "exported 3 messages" in err

    target = tmp_path / "out.jsonl"
    code, out, err = convo(
        database_url, "export", "--tenant", "acme", "-c", str(cid), "--events", "-o", str(target)
    )
    assert code == 0, err
    assert out == ""
    events = jsonl(target.read_text())
    assert [e["version"] for e in events] == [1, 2, 3, 4]
    assert f"exported 4 events to {target}" in err


def test_export_every_conversation_changed_since(database_url: str) -> None:
    async def steps(storage: PostgresStorage) -> list[str]:
        await conversation_with(storage, "globex", "not acme's")
        return [await conversation_with(storage, "acme", f"in {i}") for i in range(2)]

    first, second = write(database_url, steps)
    code, out, err = convo(database_url, "export", "--tenant", "acme", "--since", "1h")
    assert code == 0, err
    lines = jsonl(out)
    assert sorted(m["conversation_id"] for m in lines) == sorted([str(first), str(second)])
    assert sorted(m["content"] for m in lines) == ["in 0", "in 1"]

    code, out, err = convo(database_url, "export", "--tenant", "acme", "--since", "2999-01-01")
    assert (code, out) == (0, "")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "exactly one of"),
        (["-c", "x", "--since", "1h"], "exactly one of"),
        (["--since", "last tuesday"], "neither an ISO 8601 time"),
        (["-c", "00000000-0000-0000-0000-000000000001"], "does not exist"),
    ],
)
def test_export_refuses_bad_input_with_one_line(
    database_url: str, args: list[str], says: str
) -> None:
    code, out, err = convo(database_url, "export", *args)
    assert code == 2
    assert out == ""
    assert says in err
    assert len(err.strip().splitlines()) == 1


def test_since_reads_ages_and_times() -> None:
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    assert parse_since("90m", now) == now - timedelta(minutes=90)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2026-11-01T00:00:00") == datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_since("2026-11-01T00:00:00+02:00").utcoffset() == timedelta(hours=2)


def test_tail_prints_the_tenants_events_and_stops_after_count(database_url: str) -> None:
    async def steps(storage: PostgresStorage) -> str:
        await conversation_with(storage, "globex")
        return await conversation_with(storage, "acme", "one")

    cid = write(database_url, steps)
    code, out, err = convo(
        database_url, "tail", "--tenant", "acme", "--after", "0-0", "--count", "2"
    )
    assert code == 0, err
    events = jsonl(out)
    assert [(e["type"], e["conversation_id"]) for e in events] == [
        ("conversation_started", str(cid)),
        ("message_appended", str(cid)),
    ]
    code, out, _ = convo(
        database_url, "tail", "--tenant", "acme", "--after", events[0]["checkpoint"], "--count", "1"
    )
    assert jsonl(out) == events[1:]


def test_tail_refuses_a_bad_checkpoint(database_url: str) -> None:
    code, _, err = convo(database_url, "tail", "--after", "soon")
    assert code == 2
    assert "not a feed position" in err
    elsewhere = FeedVector.of({"mars": FeedPosition(transaction_id=1, position=1)}).token()
    code, _, err = convo(database_url, "tail", "--after", elsewhere, "--count", "1")
    assert code == 2
    assert "partition 'mars'" in err
