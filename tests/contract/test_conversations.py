"""Contract: conversations — create, get, archive, delete, tenants, and the
expected-version check every write makes."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import pytest

from store.domain.conversation_keys import stream_id
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationExists,
    ConversationIsArchived,
    ConversationNotFound,
    InvalidOperation,
)
from store.domain.events import ConversationPurged
from store.domain.records import StreamState
from store.postgres import PostgresStorage
from store.postgres.tables import PROJECTION_TABLES
from store.repository import Repository
from tests.contract.conftest import RepositoryFactory, Snapshot, append_texts, seqs, user

Read = Callable[[Repository, str], Awaitable[object]]

READS: dict[str, Read] = {
    "get_conversation": lambda r, c: r.get_conversation(c),
    "visible_window": lambda r, c: r.visible_window(c),
    "recent_by_role": lambda r, c: r.recent_by_role(c, "user", 3),
    "recent_by_role_history": lambda r, c: r.recent_by_role(c, "user", 3, scope="history"),
    "read_messages": lambda r, c: r.read_messages(c, order="desc", limit=5),
    "role_range": lambda r, c: r.role_range(c, "user", 1, 2),
    "count_by_role": lambda r, c: r.count_by_role(c),
    "tool_blocks": lambda r, c: r.tool_blocks(c),
    "batch_messages": lambda r, c: r.batch_messages(c, 1),
    "batches": lambda r, c: r.batches(c),
    "context_slots": lambda r, c: r.context_slots(c),
    "agent_profile": lambda r, c: r.agent_profile(c),
}

WRITES: dict[str, Read] = {
    "append_messages": lambda r, c: r.append_messages(c, [user("hi")]),
    "replace": lambda r, c: r.replace(c, 1, "new"),
    "update_slot": lambda r, c: r.update_slot(c, "useful_info", "x"),
    "start_batch": lambda r, c: r.start_batch(c, 1),
    "clear": lambda r, c: r.clear(c),
    "insert": lambda r, c: r.insert(c, 0, [user("x")]),
    "rollback_to_batch": lambda r, c: r.rollback_to_batch(c, 1),
    "archive": lambda r, c: r.archive(c),
    "delete": lambda r, c: r.delete(c),
}


async def test_create_then_get(repository: Repository) -> None:
    created = await repository.create_conversation(metadata={"project": "demo", "tags": ["a"]})

    assert created.version == 1  # ConversationStarted
    assert (created.current_batch, created.next_seq) == (1, 1)
    assert created.tenant == "default"
    assert not created.archived
    assert created.metadata == {"project": "demo", "tags": ["a"]}
    assert created.started_at.tzinfo is not None
    assert await repository.get_conversation(created.id) == created


async def test_create_with_a_chosen_id(repository: Repository) -> None:
    chosen = uuid.uuid4()
    created = await repository.create_conversation(chosen)
    assert created.id == str(chosen)
    assert created.metadata == {}
    # A UUID and its text name the same conversation.
    assert (await repository.get_conversation(str(chosen))).id == str(chosen)


@pytest.mark.parametrize("chosen", ["user-123", "会话 42", "a" * 200, "x", "thread:7/β"])
async def test_any_printable_string_is_an_id(repository: Repository, chosen: str) -> None:
    created = await repository.create_conversation(chosen, metadata={"k": 1})
    await repository.append_messages(chosen, [user("hi")])

    assert created.id == chosen
    assert (await repository.get_conversation(chosen)).version == 2
    assert [m.text for m in await repository.visible_window(chosen)] == ["hi"]


@pytest.mark.parametrize(
    ("chosen", "problem"),
    [
        ("", "cannot be empty"),
        ("a" * 201, "at most 200 characters"),
        ("bad\nid", "printable"),
        ("tab\there", "printable"),
        (" padded", "whitespace"),
    ],
)
async def test_ids_that_are_not_printable_strings_are_refused(
    repository: Repository, chosen: str, problem: str
) -> None:
    with pytest.raises(InvalidOperation, match=problem):
        await repository.create_conversation(chosen)
    with pytest.raises(InvalidOperation, match=problem):
        await repository.append_messages(chosen, [user("hi")])


async def test_errors_name_the_id_the_caller_used(repository: Repository) -> None:
    with pytest.raises(ConversationNotFound, match="conversation user-404 does not exist") as e:
        await repository.visible_window("user-404")
    assert e.value.conversation_id == "user-404"
    await repository.create_conversation("user-1")
    with pytest.raises(ConcurrencyConflict, match="conversation user-1:") as conflict:
        await repository.append_messages("user-1", [user("hi")], expected_version=7)
    assert conflict.value.conversation_id == "user-1"


async def test_creating_an_existing_conversation_conflicts(repository: Repository) -> None:
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [user("hi")])

    with pytest.raises(ConversationExists, match="already exists") as caught:
        await repository.create_conversation(conversation.id)
    assert isinstance(caught.value, ConcurrencyConflict)  # what callers caught before
    assert caught.value.actual == 2
    assert (await repository.get_conversation(conversation.id)).version == 2


@pytest.mark.parametrize("operation", [*READS, *WRITES])
async def test_unknown_conversation_is_not_found(repository: Repository, operation: str) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(ConversationNotFound):
        await {**READS, **WRITES}[operation](repository, missing)


async def test_each_event_bumps_the_version_by_one(
    repository: Repository, conversation_id: str
) -> None:
    appended = await repository.append_messages(conversation_id, [user("a"), user("b")])
    assert appended.version == 3
    assert await repository.update_slot(conversation_id, "useful_info", "x") == 4
    batch = await repository.start_batch(conversation_id, 2, summary=user("summary"))
    assert batch.version == 6  # BatchStarted + the summary's MessageAppended
    inserted = await repository.insert(conversation_id, 0, [user("c"), user("d")])
    assert inserted.version == 9  # BatchStarted + two messages
    assert (await repository.get_conversation(conversation_id)).version == 9


async def test_stale_expected_version_conflicts_and_writes_nothing(
    repository: Repository, conversation_id: str
) -> None:
    first = await repository.append_messages(conversation_id, [user("a")], expected_version=1)
    assert first.version == 2
    before = await Snapshot.take(repository, conversation_id)

    with pytest.raises(ConcurrencyConflict) as caught:
        await repository.append_messages(conversation_id, [user("b")], expected_version=1)
    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert "expected 1" in str(caught.value)
    assert "version 2" in str(caught.value)
    with pytest.raises(ConcurrencyConflict):
        await repository.truncate(conversation_id, keep_last=0, expected_version=5)
    with pytest.raises(ConcurrencyConflict):
        await repository.update_slot(conversation_id, "useful_info", "x", expected_version=0)
    with pytest.raises(ConcurrencyConflict, match="no stream"):
        await repository.replace(conversation_id, 2, "z", expected_version=StreamState.NO_STREAM)

    assert await Snapshot.take(repository, conversation_id) == before
    second = await repository.append_messages(conversation_id, [user("b")], expected_version=2)
    assert second.version == 3


async def test_archive_flags_the_conversation(repository: Repository, conversation_id: str) -> None:
    await append_texts(repository, conversation_id, "U", "A")

    archived = await repository.archive(conversation_id)

    assert archived.archived
    assert archived.version == 4
    assert seqs(await repository.visible_window(conversation_id)) == [1, 2]
    # Archived means read-only until unarchived.
    with pytest.raises(ConversationIsArchived, match="read-only"):
        await repository.append_messages(conversation_id, [user("later")])
    assert (await repository.get_conversation(conversation_id)).archived
    await repository.unarchive(conversation_id)
    appended = await repository.append_messages(conversation_id, [user("later")])
    assert seqs(appended.messages) == [3]


@pytest.mark.parametrize("operation", [*READS, *WRITES])
async def test_reads_and_writes_of_a_deleted_conversation_say_it_was_deleted(
    repository: Repository, conversation_id: str, operation: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A")
    await repository.delete(conversation_id)

    with pytest.raises(ConversationDeleted):
        await {**READS, **WRITES}[operation](repository, conversation_id)


async def test_a_deleted_id_cannot_be_reused(repository: Repository, conversation_id: str) -> None:
    await repository.delete(conversation_id)
    with pytest.raises(ConversationDeleted):
        await repository.create_conversation(conversation_id)


async def test_delete_purges_postgres_rows(
    repository: Repository, conversation_id: str, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend != "postgres":
        pytest.skip("row purge is a PostgreSQL storage property")
    await append_texts(repository, conversation_id, "U", "A")
    await repository.update_slot(conversation_id, "useful_info", "x")

    await repository.delete(conversation_id)

    storage: PostgresStorage = request.getfixturevalue("contract_storage")
    async with storage.pool.connection() as conn:
        for table in PROJECTION_TABLES:
            cursor = await conn.execute(
                f"SELECT count(*) FROM {table.name} WHERE conversation_id = %s",
                (stream_id(repository.tenant, conversation_id),),
            )
            assert await cursor.fetchone() == (0,), table.name
        cursor = await conn.execute(
            "SELECT version, type, data FROM events WHERE conversation_id = %s",
            (stream_id(repository.tenant, conversation_id),),
        )
        remaining = await cursor.fetchall()
    # Only the content-free tombstone event remains, for feed readers.
    assert [tuple(r) for r in remaining] == [(5, ConversationPurged().type, {})]


async def test_other_tenants_cannot_see_or_touch_a_conversation(
    make_repository: RepositoryFactory,
) -> None:
    ours = make_repository()
    theirs = make_repository(tenant="other")
    conversation = await ours.create_conversation()
    await ours.append_messages(conversation.id, [user("secret")])

    for operation in [*READS, *WRITES]:
        with pytest.raises(ConversationNotFound):
            await {**READS, **WRITES}[operation](theirs, conversation.id)
    # Ids are unique per tenant: the other tenant may have one of the same
    # name, which is another conversation (and learns nothing of ours).
    twin = await theirs.create_conversation(conversation.id)
    assert (twin.id, twin.tenant, twin.version) == (conversation.id, "other", 1)
    assert await theirs.visible_window(conversation.id) == []

    after = await ours.get_conversation(conversation.id)
    assert after.version == 2
    assert [m.text for m in await ours.visible_window(conversation.id)] == ["secret"]


async def test_each_tenant_sees_its_own_conversations(make_repository: RepositoryFactory) -> None:
    ours = make_repository()
    theirs = make_repository(tenant="other")
    mine = await ours.create_conversation()
    yours = await theirs.create_conversation()

    assert (await theirs.get_conversation(yours.id)).tenant == "other"
    with pytest.raises(ConversationNotFound):
        await ours.get_conversation(yours.id)
    with pytest.raises(ConversationNotFound):
        await theirs.get_conversation(mine.id)
