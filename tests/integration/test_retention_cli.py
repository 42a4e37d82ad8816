"""`convo retention` against a real database, in-process (CliRunner): the
dry run moves nothing, archive moves only archived conversations older than
the age and deletes them after their copy verifies, restore puts them back.

Conversations cannot be made old here, so the age that makes the recent
ones move is `0s` (last written before now), and `30d` the one that keeps
them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from store.domain.conversation_keys import stream_id
from store.domain.errors import ConversationDeleted
from store.domain.messages import Message
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.integration.test_export_cli import convo, write


def test_archive_dry_run_then_move_then_restore(database_url: str, tmp_path: Path) -> None:
    async def steps(storage: PostgresStorage) -> dict[str, Any]:
        acme = Repository(storage, tenant="acme")
        for key in ("old-1", "old-2", "open"):
            await acme.create_conversation(key)
            await acme.append_messages(key, [Message(role="user", content=f"{key} says hi")])
        await acme.archive("old-1")
        await acme.archive("old-2")
        other = Repository(storage, tenant="globex")
        await other.create_conversation("theirs")
        await other.archive("theirs")
        events = await acme.conversation_events("old-1")
        return {"old-1": [e.model_dump(exclude={"checkpoint"}) for e in events]}

    before = write(database_url, steps)
    cold = tmp_path / "cold"

    def archive(older_than: str, *more: str) -> tuple[int, str, str]:
        return convo(
            database_url,
            *("retention", "archive", "--older-than", older_than),
            *("--to", str(cold), "--tenant", "acme", *more),
        )

    code, out, err = archive("30d")
    assert code == 0, err
    assert out == ""
    assert "moved 0 conversations" in err

    code, out, err = archive("0s", "--dry-run")
    assert code == 0, err
    assert [line.split(":")[0] for line in out.splitlines()] == [
        "would move old-1",
        "would move old-2",
    ]
    assert list(cold.iterdir()) == []  # the 30d run made the directory, the dry run wrote nothing

    code, out, err = archive("0s")
    assert code == 0, err
    assert "moved 2 conversations (6 events)" in err
    copy = cold / f"{stream_id('acme', 'old-1')}.jsonl"
    manifest = json.loads(copy.with_name(copy.name.replace(".jsonl", ".manifest.json")).read_text())
    assert (manifest["tenant"], manifest["conversation_id"], manifest["events"]) == (
        "acme",
        "old-1",
        3,
    )
    assert sorted(p.name for p in cold.iterdir()) == sorted(
        f"{stream_id('acme', k)}{suffix}"
        for k in ("old-1", "old-2")
        for suffix in (".jsonl", ".manifest.json")
    )

    async def gone(storage: PostgresStorage) -> list[str]:
        acme = Repository(storage, tenant="acme")
        deleted = []
        for key in ("old-1", "old-2"):
            try:
                await acme.get_conversation(key)
            except ConversationDeleted:
                deleted.append(key)
        await acme.get_conversation("open")  # not archived: it stays
        await Repository(storage, tenant="globex").get_conversation("theirs")  # another tenant's
        return deleted

    assert write(database_url, gone) == ["old-1", "old-2"]

    code, out, err = convo(database_url, "retention", "restore", str(copy))
    assert code == 0, err
    assert out.strip() == "restored old-1 (tenant acme): 3 events"

    async def after(storage: PostgresStorage) -> list[dict[str, Any]]:
        events = await Repository(storage, tenant="acme").conversation_events("old-1")
        return [e.model_dump(exclude={"checkpoint"}) for e in events]

    assert write(database_url, after) == before["old-1"]
    # The store checks out end to end: views equal a rebuild, feed order, no
    # gaps, and the other one's tombstone is what a deletion leaves.
    code, out, err = convo(database_url, "verify")
    assert code == 0, out + err
    # The other one back too, by its manifest.
    second = cold / f"{stream_id('acme', 'old-2')}.manifest.json"
    code, out, err = convo(database_url, "retention", "restore", str(second))
    assert code == 0, err
    code, out, err = convo(database_url, "verify")
    assert code == 0, out + err

    # Once back, it is live: a second restore is refused, exit 2, nothing written.
    code, out, err = convo(database_url, "retention", "restore", str(copy))
    assert code == 2
    assert "already exists" in err


def test_bad_input_exits_2_with_one_line(database_url: str, tmp_path: Path) -> None:
    code, _, err = convo(
        database_url, "retention", "archive", "--older-than", "a month", "--to", str(tmp_path)
    )
    assert code == 2
    assert "not an age" in err
    code, _, err = convo(database_url, "retention", "restore", str(tmp_path / "nothing.jsonl"))
    assert code == 2
    assert "nothing.manifest.json is missing" in err
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = convo(database_url, "retention", "restore", str(tmp_path / "notes.txt"))
    assert code == 2
    assert ".jsonl" in err
