"""Contract: a window per agent. A batch operation acts on one agent's
window; the other agents' windows, and every earlier batch, stay as they
were; an agent's messages join its own window."""

from __future__ import annotations

import pytest

from store.domain.errors import InvalidMessage, InvalidOperation
from store.domain.messages import Message, Role
from store.domain.operations import Clear, StartBatch
from store.repository import Repository
from tests.contract.conftest import append_texts, assistant, seqs, user


def helper(text: str, role: Role = "user") -> Message:
    return Message(role=role, content=text, agent_id="helper")


@pytest.fixture
async def two_agents(repository: Repository, conversation_id: str) -> str:
    """Seqs 1-2 main, 3-4 helper, 5-6 main, 7 helper."""
    await append_texts(repository, conversation_id, "U", "A")
    await repository.append_messages(conversation_id, [helper("h3"), helper("h4", "assistant")])
    await append_texts(repository, conversation_id, "U", "A")
    await repository.append_messages(conversation_id, [helper("h7")])
    return conversation_id


async def test_compacting_main_leaves_a_sub_agents_window_and_payload_unchanged(
    repository: Repository, two_agents: str
) -> None:
    cid = two_agents
    await repository.update_slot(cid, "role_definition", "You search.", agent_id="helper")
    before = await repository.assemble(cid, agent_id="helper")
    helper_window = await repository.visible_window(cid, agent_id="helper")

    result = await repository.start_batch(cid, 5, summary=assistant("earlier: a question"))

    assert (result.batch, result.visible) == (2, 3)
    assert seqs(await repository.visible_window(cid, agent_id="main")) == [8, 5, 6]
    assert await repository.visible_window(cid, agent_id="helper") == helper_window
    assert (await repository.assemble(cid, agent_id="helper")).payload == before.payload
    summary = (await repository.visible_window(cid, agent_id="main"))[0]
    assert (summary.agent_id, summary.batch) == ("main", 2)
    helper_payload = (await repository.assemble(cid, agent_id="helper")).payload
    assert "h7" in str(helper_payload)
    assert "h3" in str(helper_payload)


async def test_each_agents_messages_join_its_own_window(
    repository: Repository, two_agents: str
) -> None:
    cid = two_agents
    await repository.clear(cid, keep_system=False, agent_id="helper")  # batch 2: helper's

    appended = await repository.append_messages(cid, [user("u8"), helper("h9")])

    assert [(m.seq, m.batch) for m in appended.messages] == [(8, 1), (9, 2)]
    assert seqs(await repository.visible_window(cid, agent_id="helper")) == [9]
    assert seqs(await repository.visible_window(cid, agent_id="main")) == [1, 2, 5, 6, 8]
    # No agent named: every agent's current window, in window order.
    assert seqs(await repository.visible_window(cid)) == [1, 2, 5, 6, 8, 9]
    paged: list[int] = []
    cursor = None
    while True:
        page = await repository.read_window(cid, cursor=cursor, limit=2)
        paged += seqs(page.items)
        if (cursor := page.next_cursor) is None:
            break
    assert paged == [1, 2, 5, 6, 8, 9]
    conversation = await repository.get_conversation(cid)
    assert conversation.current_batch == 1  # the main agent's
    counts = await repository.count_by_role(cid)
    assert (counts["user"], counts["assistant"]) == (4, 2)
    [recent] = await repository.recent_by_role(cid, "user", 1, agent_id="helper")
    assert recent.seq == 9
    # No agent named, with an agent in a window of its own: across the windows.
    users = [m.seq for m in await repository.visible_window(cid) if m.role == "user"]
    assert seqs(await repository.recent_by_role(cid, "user", 2)) == users[-2:]
    visible = await repository.read_messages(cid, scope="visible")
    assert seqs(visible) == [1, 2, 5, 6, 8, 9]


async def test_every_earlier_batch_of_every_agent_stays_readable(
    repository: Repository, two_agents: str
) -> None:
    cid = two_agents
    first = await repository.visible_window(cid, batch=1)
    await repository.truncate(cid, keep_last=1, agent_id="helper")  # batch 2
    await repository.start_batch(cid, 6)  # batch 3: main's
    helper_two = await repository.visible_window(cid, batch=2)
    await repository.filter(cid, roles=["assistant"], agent_id="helper")  # batch 4 (empty)

    assert await repository.visible_window(cid, batch=1) == first
    assert seqs(await repository.visible_window(cid, batch=2)) == [7]
    assert await repository.visible_window(cid, batch=2) == helper_two
    assert seqs(await repository.visible_window(cid, batch=3)) == [6]
    assert await repository.visible_window(cid, agent_id="helper") == []
    batches = await repository.batches(cid)
    assert [(b.number, b.agent_id, b.operation) for b in batches] == [
        (1, None, "conversation_started"),
        (2, "helper", "truncate"),
        (3, "main", "start_batch"),
        (4, "helper", "filter"),
    ]


async def test_rollback_is_to_one_of_the_agents_own_batches(
    repository: Repository, two_agents: str
) -> None:
    cid = two_agents
    await repository.clear(cid, agent_id="helper")  # 2: helper's
    await repository.clear(cid)  # 3: main's

    with pytest.raises(InvalidOperation, match="another agent's window"):
        await repository.rollback_to_batch(cid, 3, agent_id="helper")
    with pytest.raises(InvalidOperation, match="no batch 9"):
        await repository.rollback_to_batch(cid, 9, agent_id="helper")
    result = await repository.rollback_to_batch(cid, 1, agent_id="helper")

    assert (result.batch, result.visible) == (4, 3)
    assert seqs(await repository.visible_window(cid, agent_id="helper")) == [3, 4, 7]
    assert await repository.visible_window(cid, agent_id="main") == []


async def test_inserted_and_summary_messages_belong_to_the_operations_agent(
    repository: Repository, two_agents: str
) -> None:
    cid = two_agents

    await repository.insert(cid, 1, [user("between")], agent_id="helper")
    with pytest.raises(InvalidMessage, match="agent 'main'"):
        await repository.insert(
            cid, 0, [Message(role="user", content="x", agent_id="main")], agent_id="helper"
        )

    window = await repository.visible_window(cid, agent_id="helper")
    assert [m.text for m in window] == ["h3", "between", "h4", "h7"]
    assert {m.agent_id for m in window} == {"helper"}
    assert seqs(await repository.visible_window(cid, agent_id="main")) == [1, 2, 5, 6]


async def test_operation_values_carry_the_agent(repository: Repository) -> None:
    assert StartBatch(boundary_seq=1).agent_id == "main"
    assert Clear(agent_id="helper").agent_id == "helper"
    with pytest.raises(InvalidOperation, match="agent_id"):
        await repository.clear("no-such", agent_id="")
