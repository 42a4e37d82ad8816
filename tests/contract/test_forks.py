"""Contract: forking a conversation (`Repository.fork`): the fork's history
is the parent's up to a seq (of one agent, if asked), and afterwards the two
are independent."""

from __future__ import annotations

import pytest

from store.domain.context import AgentProfile, TodoItem
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationNotFound,
    InvalidOperation,
)
from store.domain.messages import Message
from store.repository import Repository
from tests.contract.conftest import RepositoryFactory, append_texts, assistant, call, seqs, tool


def helper(text: str) -> Message:
    return Message(role="user", content=text, agent_id="helper")


@pytest.fixture
async def parent(repository: Repository, conversation_id: str) -> str:
    """1 U, 2 A[c1], 3 T(c1), 4 helper U, 5 U (edited), 6 A[c2], 7 T(c2); 1 pinned."""
    await repository.configure_agent(conversation_id, AgentProfile(system_prompt="You code."))
    await repository.update_slot(
        conversation_id, "todo", [TodoItem(id="1", content="fix", status="pending")]
    )
    await append_texts(repository, conversation_id, "U")
    await repository.append_messages(
        conversation_id, [assistant("", call("c1")), tool("c1", "a.txt")]
    )
    await repository.append_messages(conversation_id, [helper("h4")])
    await append_texts(repository, conversation_id, "U")
    await repository.replace(conversation_id, 5, "U5, edited")
    await repository.append_messages(conversation_id, [assistant("", call("c2"))])
    await repository.append_messages(conversation_id, [tool("c2", "late")])
    await repository.pin_message(conversation_id, 1)
    return conversation_id


async def test_a_fork_reads_as_its_parent_did(repository: Repository, parent: str) -> None:
    cid = parent

    fork = await repository.fork(cid, new_conversation_id=f"{cid}-fork", metadata={"from": cid})

    assert (fork.id, fork.next_seq, fork.current_batch, fork.metadata) == (
        f"{cid}-fork",
        8,
        1,
        {"from": cid},
    )
    assert fork.version == (await repository.get_conversation(fork.id)).version
    parent_history = await repository.read_messages(cid)
    fork_history = await repository.read_messages(fork.id)
    assert [
        (m.seq, m.text, m.role, m.agent_id, m.pinned, m.role_ordinal) for m in fork_history
    ] == [(m.seq, m.text, m.role, m.agent_id, m.pinned, m.role_ordinal) for m in parent_history]
    assert (await repository.assemble(fork.id, format="anthropic")).payload == (
        await repository.assemble(cid, format="anthropic")
    ).payload
    assert await repository.tool_blocks(fork.id) == await repository.tool_blocks(cid)
    assert await repository.count_by_role(fork.id, scope="history") == (
        await repository.count_by_role(cid, scope="history")
    )


async def test_a_fork_up_to_a_seq_has_that_history_and_its_calls_are_pending(
    repository: Repository, parent: str
) -> None:
    cid = parent

    fork = await repository.fork(cid, up_to_seq=6)

    assert seqs(await repository.visible_window(fork.id)) == [1, 2, 3, 4, 5, 6]
    assert fork.next_seq == 7
    [pending] = await repository.tool_blocks(fork.id, pending_only=True)
    assert (pending.call_id, pending.result_seq) == ("c2", None)
    assert [m.text for m in await repository.read_messages(fork.id)][4] == "U5, edited"
    # The fork's own thread goes on: c2 can be answered in the fork.
    appended = await repository.append_messages(fork.id, [tool("c2", "in the fork")])
    assert appended.messages[0].seq == 7


async def test_a_fork_keeps_each_agents_window_as_the_parent_showed_it(
    repository: Repository, parent: str
) -> None:
    """A compacted parent's fork is compacted the same way: the fork's
    payload is the parent's, not its whole history."""
    cid = parent
    await repository.start_batch(cid, 5, retain=[1])  # main: 1, then 5 on
    await repository.append_messages(cid, [helper("h8"), Message(role="user", content="U9")])
    await repository.truncate(cid, keep_last=1, agent_id="helper")  # helper: h8 only

    fork = await repository.fork(cid)

    for agent in ("main", "helper"):
        assert seqs(await repository.visible_window(fork.id, agent_id=agent)) == seqs(
            await repository.visible_window(cid, agent_id=agent)
        ), agent
    assert 1 in seqs(await repository.visible_window(fork.id))
    assert 2 not in seqs(await repository.visible_window(fork.id))  # compacted away
    assert seqs(await repository.visible_window(fork.id, agent_id="helper")) == [8]
    for format in ("openai-chat", "anthropic"):
        assert (await repository.assemble(fork.id, format=format)).payload == (
            await repository.assemble(cid, format=format)
        ).payload
    # The whole history is the fork's, and what it appends next is shown.
    assert len(await repository.read_messages(fork.id)) == 9
    appended = await repository.append_messages(fork.id, [Message(role="user", content="U10")])
    assert seqs(await repository.visible_window(fork.id))[-1] == appended.messages[0].seq

    # Up to an earlier seq: each agent's window as it was then. Before the
    # compaction, all of it; after it (h8 came after main's compaction, and
    # before the helper's truncation), main's compacted window.
    early = await repository.fork(cid, up_to_seq=4)
    assert seqs(await repository.visible_window(early.id)) == [1, 2, 3, 4]
    assert (await repository.get_conversation(early.id)).current_batch == 1
    at_h8 = await repository.fork(cid, up_to_seq=8)
    main_then = [s for s in seqs(await repository.visible_window(cid, agent_id="main")) if s <= 8]
    assert seqs(await repository.visible_window(at_h8.id, agent_id="main")) == main_then
    assert 2 not in main_then
    assert seqs(await repository.visible_window(at_h8.id, agent_id="helper")) == [4, 8]


async def test_a_fork_of_one_agent_has_only_its_messages(
    repository: Repository, parent: str
) -> None:
    cid = parent
    await repository.update_slot(cid, "role_definition", "You search.", agent_id="helper")

    fork = await repository.fork(cid, agent_id="helper")

    [message] = await repository.read_messages(fork.id)
    assert (message.seq, message.text, message.role_ordinal) == (4, "h4", 1)
    assert (await repository.agent_profile(fork.id, "helper")).role_definition == "You search."
    assert (await repository.agent_profile(fork.id)).system_prompt is None
    with pytest.raises(InvalidOperation, match="agent 'nobody' has no message"):
        await repository.fork(cid, agent_id="nobody")


async def test_fork_and_parent_are_independent_afterwards(
    repository: Repository, parent: str
) -> None:
    cid = parent
    fork = await repository.fork(cid)

    await repository.append_messages(cid, [Message(role="user", content="parent only")])
    await repository.append_messages(fork.id, [Message(role="user", content="fork only")])
    await repository.replace(fork.id, 1, "U1 in the fork")
    await repository.start_batch(cid, 6)

    assert [m.text for m in await repository.read_messages(cid)][-1] == "parent only"
    assert [m.text for m in await repository.read_messages(fork.id)][-1] == "fork only"
    assert (await repository.read_messages(cid))[0].text == "U1"
    assert seqs(await repository.visible_window(fork.id)) == [1, 2, 3, 4, 5, 6, 7, 8]


async def test_a_fork_of_a_fork_and_a_deleted_parent(repository: Repository, parent: str) -> None:
    cid = parent
    fork = await repository.fork(cid, up_to_seq=5)
    await repository.append_messages(fork.id, [Message(role="user", content="fork 6")])
    grandchild = await repository.fork(fork.id)
    expected = [(m.seq, m.text) for m in await repository.read_messages(grandchild.id)]

    await repository.delete(cid)
    await repository.delete(fork.id)

    assert [(m.seq, m.text) for m in await repository.read_messages(grandchild.id)] == expected
    assert expected[-1] == (6, "fork 6")
    payload = (await repository.assemble(grandchild.id)).payload
    assert "fork 6" in str(payload)
    with pytest.raises(ConversationDeleted):
        await repository.fork(cid)


async def test_a_fork_is_refused_cleanly(
    make_repository: RepositoryFactory, repository: Repository, conversation_id: str
) -> None:
    cid = conversation_id
    await append_texts(repository, cid, "U", "A")
    other = await repository.create_conversation()

    with pytest.raises(InvalidOperation, match="past the parent's last message"):
        await repository.fork(cid, up_to_seq=3)
    with pytest.raises(InvalidOperation, match="up_to_seq"):
        await repository.fork(cid, up_to_seq=0)
    with pytest.raises(ConcurrencyConflict):
        await repository.fork(cid, new_conversation_id=other.id)
    with pytest.raises(ConversationNotFound):
        await repository.fork("no such conversation")
    stranger = make_repository(tenant=f"other-{cid}")
    with pytest.raises(ConversationNotFound):
        await stranger.fork(cid)
    # Nothing of a refused fork remains.
    with pytest.raises(ConversationNotFound):
        await repository.get_conversation("never-made")
    with pytest.raises(InvalidOperation):
        await repository.fork(cid, new_conversation_id="never-made", up_to_seq=9)
    with pytest.raises(ConversationNotFound):
        await repository.get_conversation("never-made")
