"""Contract: retention — archived conversations moved to cold storage
(files) and put back, on both backends. A round trip gives back the same
history, payloads and feed-visible events; a failure between the copy and
the deletion loses nothing; conversations that are not archived, or were
written recently, never move.

Each test works in a tenant of its own: the candidates are a tenant's
archived conversations, and the PostgreSQL contract run shares a database.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from store.domain.context import AgentProfile, TodoItem
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationExists,
    InvalidOperation,
)
from store.domain.feed import FeedEvent
from store.domain.feed_vector import FeedVector, parse_position
from store.domain.messages import Message, ToolCall
from store.repository import Repository, cold_storage
from store.repository.cold_storage import (
    ColdCopyMismatch,
    archive_conversation,
    cold_paths,
    read_back,
    restore_cold_copy,
    retention_candidates,
)
from tests.contract.conftest import RepositoryFactory, Snapshot, append_texts
from tests.feed_reading import feed_until


@pytest.fixture
def tenant_repository(make_repository: RepositoryFactory) -> Repository:
    return make_repository(tenant=f"retention-{uuid.uuid4().hex[:8]}")


async def a_rich_conversation(repository: Repository, key: str) -> str:
    """A conversation with most of what a log holds, archived."""
    await repository.create_conversation(key, metadata={"project": "parser"})
    await repository.configure_agent(key, AgentProfile(system_prompt="You are a coding agent."))
    await repository.update_slot(key, "todo", [TodoItem(id="1", content="fix", status="pending")])
    await repository.append_messages(
        key,
        [
            Message(role="user", content="The parser test is flaky.", client_message_id="u-1"),
            Message(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="c1", name="grep", arguments={"p": "parse"}),),
                reasoning=({"provider": "anthropic", "text": "look first"},),
            ),
            Message(role="tool", tool_call_id="c1", content="tests/test_parser.py:42"),
            Message(role="user", content="[the TODO list changed]", kind="reminder"),
        ],
    )
    await append_texts(repository, key, "A", "U", "A")
    await repository.pin_message(key, 1)
    await repository.update_metadata(key, {"stage": "done"})
    await repository.archive(key)
    return key


async def everything(repository: Repository, key: str) -> dict[str, Any]:
    """What a reader can see of the conversation, its log included."""
    events = await repository.conversation_events(key, limit=1000)
    return {
        "snapshot": await Snapshot.take(repository, key),
        "messages": await repository.read_messages(key, limit=1000),
        "events": [(e.version, e.type, e.data, e.recorded_at) for e in events],
        "metadata": (await repository.get_conversation(key)).metadata,
    }


def as_seen(events: list[FeedEvent]) -> list[tuple[str, int, str, dict[str, Any]]]:
    return [(e.conversation_id, e.version, e.type, e.data) for e in events]


async def test_a_round_trip_gives_back_the_same_history_payloads_and_feed_events(
    tenant_repository: Repository, tmp_path: Path
) -> None:
    repository = tenant_repository
    key = await a_rich_conversation(repository, "user-123")
    before = await everything(repository, key)
    conversation = await repository.get_conversation(key)
    first_feed = await feed_until(repository, FeedVector.origin(), conversation.version, key=key)
    start = parse_position(first_feed[-1].checkpoint)

    manifest = await archive_conversation(repository, conversation, tmp_path)
    assert manifest.events == conversation.version
    assert conversation.updated_at is not None
    assert [c async for c in retention_candidates(repository, conversation.updated_at)] == []
    with pytest.raises(ConversationDeleted):
        await repository.get_conversation(key)
    # A feed reader sees the deletion…
    [gone] = await feed_until(repository, start, 1, key=key)
    assert gone.type == "conversation_deleted"

    copy, _ = cold_paths(tmp_path, repository.tenant, key)
    restored = await restore_cold_copy(repository, copy)
    assert restored == conversation
    assert await everything(repository, key) == before
    # …then the same events again, in version order (the deletion's left with it).
    again = await feed_until(
        repository, parse_position(gone.checkpoint), conversation.version, key=key
    )
    assert as_seen(again) == as_seen(first_feed)
    assert as_seen(await feed_until(repository, start, len(again), key=key)) == as_seen(again)
    # It lives on: unarchived, it takes the next version and seq.
    await repository.unarchive(key)
    appended = await repository.append_messages(key, [Message(role="user", content="again")])
    assert appended.messages[0].seq == before["messages"][-1].seq + 1


async def test_only_archived_conversations_last_written_before_the_time_move(
    tenant_repository: Repository,
) -> None:
    repository = tenant_repository
    old = (await repository.create_conversation("old")).id
    await repository.archive(old)
    live = (await repository.create_conversation("live")).id
    await append_texts(repository, live, "U")
    recent = (await repository.create_conversation("recent")).id
    await repository.archive(recent)
    cutoff = (await repository.get_conversation(recent)).updated_at
    assert cutoff is not None

    moving = [c.id async for c in retention_candidates(repository, cutoff)]
    assert moving == ["old"]


async def test_a_copy_that_does_not_verify_deletes_nothing(
    tenant_repository: Repository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = tenant_repository
    key = await a_rich_conversation(repository, "kept")
    before = await everything(repository, key)

    def fails(*args: object, **kwargs: object) -> None:
        raise ColdCopyMismatch("the disk lied")

    with monkeypatch.context() as patched:
        patched.setattr(cold_storage, "verify_cold_copy", fails)
        with pytest.raises(ColdCopyMismatch):
            await archive_conversation(repository, await repository.get_conversation(key), tmp_path)
    assert await everything(repository, key) == before
    copy, manifest = cold_paths(tmp_path, repository.tenant, key)
    assert not manifest.exists()  # never verified: it cannot be restored
    with pytest.raises(InvalidOperation, match="manifest"):
        await restore_cold_copy(repository, copy)

    # The next run moves it.
    await archive_conversation(repository, await repository.get_conversation(key), tmp_path)
    await restore_cold_copy(repository, copy)
    assert await everything(repository, key) == before

    # Moved again, a copy that does not verify leaves no manifest: not even
    # the one of the copy before, which would vouch for a file it never saw.
    with monkeypatch.context() as patched:
        patched.setattr(cold_storage, "verify_cold_copy", fails)
        with pytest.raises(ColdCopyMismatch):
            await archive_conversation(repository, await repository.get_conversation(key), tmp_path)
    assert not manifest.exists()
    assert await everything(repository, key) == before


async def test_a_failed_delete_after_the_copy_loses_nothing(
    tenant_repository: Repository, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = tenant_repository
    key = await a_rich_conversation(repository, "half-moved")
    before = await everything(repository, key)

    async def crashes(*args: object, **kwargs: object) -> None:
        raise ConnectionError("the process died here")

    with monkeypatch.context() as patched:
        patched.setattr(Repository, "delete_archived", crashes)
        with pytest.raises(ConnectionError):
            await archive_conversation(repository, await repository.get_conversation(key), tmp_path)
    assert await everything(repository, key) == before
    copy, _ = cold_paths(tmp_path, repository.tenant, key)
    with pytest.raises(ConversationExists):  # a copy never overwrites a live conversation
        await restore_cold_copy(repository, copy)
    assert await everything(repository, key) == before

    await archive_conversation(repository, await repository.get_conversation(key), tmp_path)
    await restore_cold_copy(repository, copy)
    assert await everything(repository, key) == before


async def test_the_delete_refuses_a_conversation_written_after_its_copy(
    tenant_repository: Repository,
) -> None:
    repository = tenant_repository
    key = await a_rich_conversation(repository, "moved-on")
    copied = (await repository.get_conversation(key)).version
    await repository.unarchive(key)
    with pytest.raises(InvalidOperation, match="no longer archived"):
        await repository.delete_archived(key, version=copied + 1)
    await append_texts(repository, key, "U")
    await repository.archive(key)
    with pytest.raises(ConcurrencyConflict):
        await repository.delete_archived(key, version=copied)
    assert (await repository.get_conversation(key)).version == copied + 3


async def test_a_conversation_that_is_not_archived_is_not_copied(
    tenant_repository: Repository, tmp_path: Path
) -> None:
    repository = tenant_repository
    conversation = await repository.create_conversation("busy")
    with pytest.raises(InvalidOperation, match="not archived"):
        await archive_conversation(repository, conversation, tmp_path)
    assert not cold_paths(tmp_path, repository.tenant, "busy")[0].exists()


async def test_a_tampered_copy_or_manifest_is_refused_and_writes_nothing(
    tenant_repository: Repository, make_repository: RepositoryFactory, tmp_path: Path
) -> None:
    repository = tenant_repository
    key = await a_rich_conversation(repository, "tampered")
    await archive_conversation(repository, await repository.get_conversation(key), tmp_path)
    copy, manifest = cold_paths(tmp_path, repository.tenant, key)
    original = copy.read_bytes()

    copy.write_bytes(original.replace(b"flaky", b"fixed"))
    with pytest.raises(ColdCopyMismatch, match="sha256"):
        await restore_cold_copy(repository, copy)
    copy.write_bytes(original)

    with pytest.raises(InvalidOperation, match="tenant"):
        await restore_cold_copy(make_repository(tenant="someone-else"), copy)

    written = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**written, "events": "many"}))
    with pytest.raises(InvalidOperation, match="events"):
        await restore_cold_copy(repository, manifest)
    manifest.write_text(json.dumps({**written, "conversation_id": "another"}))
    with pytest.raises(InvalidOperation, match="stream id"):
        await restore_cold_copy(repository, manifest)
    manifest.write_text(json.dumps(written))

    with pytest.raises(ConversationDeleted):
        await repository.get_conversation(key)  # nothing was written
    await restore_cold_copy(repository, manifest)
    assert (await repository.get_conversation(key)).archived


async def test_a_forged_copy_of_events_the_log_cannot_hold_writes_nothing(
    tenant_repository: Repository, tmp_path: Path
) -> None:
    """A copy whose manifest was made to match it, but whose events are not
    ones the log can hold, is refused before anything is written."""
    repository = tenant_repository
    key = await a_rich_conversation(repository, "forged")
    await archive_conversation(repository, await repository.get_conversation(key), tmp_path)
    copy, manifest = cold_paths(tmp_path, repository.tenant, key)
    lines = [json.loads(line) for line in copy.read_text().splitlines()]
    for change in (
        {"type": "tables_dropped"},
        {"data": {"seq": "one", "batch": 1, "message": {"role": "user", "content": "x"}}},
    ):
        forged = [*lines[:3], {**lines[3], **change}, *lines[4:]]
        copy.write_text("".join(json.dumps(line) + "\n" for line in forged))
        events, events_sha256 = read_back(copy, key)
        written = json.loads(manifest.read_text())
        file_sha256 = hashlib.sha256(copy.read_bytes()).hexdigest()
        manifest.write_text(
            json.dumps(
                {
                    **written,
                    "events": events,
                    "events_sha256": events_sha256,
                    "file_sha256": file_sha256,
                }
            )
        )
        with pytest.raises(ColdCopyMismatch, match="version 4 is not an event the log can hold"):
            await restore_cold_copy(repository, copy)
        with pytest.raises(ConversationDeleted):
            await repository.get_conversation(key)
