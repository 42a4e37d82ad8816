"""Contract: the stable-prefix fingerprint a payload build reports, which
the storage's `PrefixCache` carries on from the window's last build, is
always the fingerprint of the prefix as defined (`fingerprint(...)` of the
messages before the special block): after appends, an edit inside the
prefix, a compaction, a change of system prompt or format, in two agents'
windows, a fork, another tenant's conversation of the same key, and a
deletion followed by a restore of other events under the same id."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from store.assembler import fingerprint as fingerprint_module
from store.assembler import prefix_cache
from store.assembler.fingerprint import fingerprint
from store.assembler.system_prompt import choose_system_prompt
from store.domain.context import AgentProfile
from store.domain.messages import MAIN_AGENT, Message
from store.repository import Repository
from store.repository.port import RestoredEvent
from tests.contract.conftest import RepositoryFactory, append_texts, assistant, call, tool

FORMATS = ("openai-chat", "openai-responses", "anthropic")


async def built_and_defined(
    repository: Repository,
    conversation_id: str,
    *,
    agent_id: str = MAIN_AGENT,
    format: str = "openai-chat",
) -> tuple[str, str]:
    """The fingerprint a build reports, and the one `fingerprint(...)` gives
    the messages of the agent's window before the special block."""
    assembly = await repository.assemble(conversation_id, agent_id=agent_id, format=format)
    prefix = assembly.diagnostics.stable_prefix
    profile = await repository.agent_profile(conversation_id, agent_id)
    system_prompt = choose_system_prompt(profile).text
    window = await repository.visible_window(conversation_id, agent_id=agent_id)
    before_block = prefix.message_count - (system_prompt is not None)
    defined = fingerprint(format=format, system_prompt=system_prompt, prefix=window[:before_block])
    return prefix.fingerprint, defined


async def assert_as_defined(
    repository: Repository,
    conversation_id: str,
    *,
    agent_id: str = MAIN_AGENT,
    format: str = "openai-chat",
) -> str:
    built, defined = await built_and_defined(
        repository, conversation_id, agent_id=agent_id, format=format
    )
    assert built == defined
    return built


@pytest.fixture
def fed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows each fingerprint the cache computes hashes."""
    counts: list[int] = []
    feed_rows = fingerprint_module.feed_rows

    def counted(digest: Any, rows: Sequence[Any]) -> None:
        counts.append(len(rows))
        feed_rows(digest, rows)

    monkeypatch.setattr(prefix_cache, "feed_rows", counted)  # where the cache calls it
    return counts


async def test_a_prefix_that_grew_is_hashed_from_where_it_was(
    repository: Repository, conversation_id: str, fed: list[int]
) -> None:
    await repository.configure_agent(conversation_id, AgentProfile(system_prompt="You code."))
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    first = await assert_as_defined(repository, conversation_id)
    assert await assert_as_defined(repository, conversation_id) == first
    await repository.append_messages(
        conversation_id, [assistant("", call("c1", q="x")), tool("c1", "found")]
    )
    await append_texts(repository, conversation_id, "U")
    assert await assert_as_defined(repository, conversation_id) != first
    # The prefix was hashed whole once, then not at all (unchanged), then
    # only its new messages.
    assert fed == [4, 3]


async def test_an_edit_inside_the_prefix_is_hashed_again(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A", "U")
    before = await assert_as_defined(repository, conversation_id)
    await repository.replace(conversation_id, 2, "A2, edited")
    edited = await assert_as_defined(repository, conversation_id)
    assert edited != before
    await repository.replace(conversation_id, 2, "A2")  # its first content again
    assert await assert_as_defined(repository, conversation_id) == before


async def test_a_compaction_moves_the_window_and_its_prefix(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A", "U", "A")
    await assert_as_defined(repository, conversation_id)
    await repository.start_batch(
        conversation_id, 5, summary=Message(role="system", content="Summary of 1-4.")
    )
    await assert_as_defined(repository, conversation_id)
    await append_texts(repository, conversation_id, "U", "A")
    await assert_as_defined(repository, conversation_id)
    await repository.rollback_to_batch(conversation_id, 1)
    await assert_as_defined(repository, conversation_id)


async def test_the_system_prompt_and_the_format_are_part_of_it(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U")
    seen = set()
    for system_prompt in (None, "You code.", "You review."):
        await repository.configure_agent(conversation_id, AgentProfile(system_prompt=system_prompt))
        for format in FORMATS:
            seen.add(await assert_as_defined(repository, conversation_id, format=format))
    assert len(seen) == 3 * len(FORMATS)


async def test_two_agents_windows(repository: Repository, conversation_id: str) -> None:
    def helper(text: str) -> Message:
        return Message(role="user", content=text, agent_id="helper")

    await repository.configure_agent(
        conversation_id, AgentProfile(agent_id="helper", role_definition="You look things up.")
    )
    await append_texts(repository, conversation_id, "U", "A")
    await repository.append_messages(conversation_id, [helper("h1"), helper("h2")])
    for _ in range(2):
        main = await assert_as_defined(repository, conversation_id)
        other = await assert_as_defined(repository, conversation_id, agent_id="helper")
        assert main != other
    await repository.start_batch(conversation_id, 2, agent_id="helper")
    await repository.append_messages(conversation_id, [helper("h3")])
    await assert_as_defined(repository, conversation_id)
    await assert_as_defined(repository, conversation_id, agent_id="helper")


async def test_a_fork_and_its_parent(repository: Repository, conversation_id: str) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    parent = await assert_as_defined(repository, conversation_id)
    fork = await repository.fork(conversation_id, up_to_seq=3)
    await append_texts(repository, fork.id, "A", "U")
    await repository.replace(fork.id, 1, "U1 in the fork")
    await assert_as_defined(repository, fork.id)
    assert await assert_as_defined(repository, conversation_id) == parent


async def test_the_same_key_in_two_tenants(make_repository: RepositoryFactory) -> None:
    key = f"shared-{uuid.uuid4().hex[:8]}"
    ours = make_repository(tenant=f"ours-{uuid.uuid4().hex[:8]}")
    theirs = make_repository(tenant=f"theirs-{uuid.uuid4().hex[:8]}")
    for repository, text in ((ours, "ours"), (theirs, "theirs")):
        await repository.create_conversation(key)
        await repository.append_messages(
            key, [Message(role="user", content=text), Message(role="assistant", content="ok")]
        )
    assert await assert_as_defined(ours, key) != await assert_as_defined(theirs, key)


async def pages_of(events: list[RestoredEvent]) -> AsyncIterator[list[RestoredEvent]]:
    yield events


async def test_a_deleted_conversation_restored_with_other_events(
    repository: Repository, conversation_id: str
) -> None:
    """The restored log has the same versions and seqs as the deleted one
    (and an edit of the same version), with other content: nothing the
    cache kept of the first may be taken for the second."""
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.replace(conversation_id, 1, "first life")
    before = await assert_as_defined(repository, conversation_id)

    other = (await repository.create_conversation()).id
    await repository.append_messages(
        other, [Message(role="user", content=f"other {n}") for n in range(4)]
    )
    await repository.replace(other, 1, "second life")
    events = [
        RestoredEvent(version=e.version, type=e.type, data=e.data, recorded_at=e.recorded_at)
        for e in await repository.conversation_events(other)
    ]

    await repository.delete(conversation_id)
    await repository.restore_conversation(conversation_id, pages_of(events))

    assert await assert_as_defined(repository, conversation_id) != before
