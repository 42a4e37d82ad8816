"""Contract: context slots, agent profiles, and `assemble` over both."""

from __future__ import annotations

import pytest

from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.errors import ConfigurationError, InvalidOperation
from store.repository import Repository
from tests.contract.conftest import Snapshot, assistant, call, tool, user

TODO = (
    TodoItem(id="1", content="read the spec", status="completed"),
    TodoItem(id="2", content="write the fake", status="in_progress"),
    TodoItem(id="3", content="run the contract"),
)


async def test_context_slots_hold_the_latest_value_of_each(
    repository: Repository, conversation_id: str
) -> None:
    assert await repository.context_slots(conversation_id) == ContextSlots()

    assert await repository.update_slot(conversation_id, "todo", TODO) == 2
    await repository.update_slot(conversation_id, "useful_info", "The repo is at /work.")
    await repository.update_slot(conversation_id, "folder_notes", "store/: the library")
    await repository.update_slot(conversation_id, "zeta", "last custom")
    await repository.update_slot(conversation_id, "alpha-notes", "first custom")
    await repository.update_slot(conversation_id, "useful_info", "The repo is at /work/main.")

    slots = await repository.context_slots(conversation_id)
    assert slots.todo == TODO
    assert [i.status for i in slots.todo] == ["completed", "in_progress", "pending"]
    assert slots.useful_info == "The repo is at /work/main."
    assert slots.folder_notes == "store/: the library"
    assert slots.custom == {"alpha-notes": "first custom", "zeta": "last custom"}
    assert list(slots.custom) == ["alpha-notes", "zeta"]  # custom slots sorted by name
    assert (await repository.get_conversation(conversation_id)).version == 7


async def test_none_clears_a_slot(repository: Repository, conversation_id: str) -> None:
    await repository.update_slot(conversation_id, "todo", TODO)
    await repository.update_slot(conversation_id, "useful_info", "x")
    await repository.update_slot(conversation_id, "scratch", "y")

    await repository.update_slot(conversation_id, "todo", None)
    await repository.update_slot(conversation_id, "useful_info", None)
    await repository.update_slot(conversation_id, "scratch", None)
    await repository.update_slot(conversation_id, "never-set", None)

    assert await repository.context_slots(conversation_id) == ContextSlots()


async def test_slots_belong_to_one_agent(repository: Repository, conversation_id: str) -> None:
    await repository.update_slot(conversation_id, "useful_info", "main's", agent_id="main")
    await repository.update_slot(conversation_id, "folder_notes", "helper's", agent_id="helper")

    main = await repository.context_slots(conversation_id)
    helper = await repository.context_slots(conversation_id, "helper")
    assert (main.useful_info, main.folder_notes) == ("main's", None)
    assert (helper.useful_info, helper.folder_notes) == (None, "helper's")


async def test_bad_slot_updates_are_refused(repository: Repository, conversation_id: str) -> None:
    before = await Snapshot.take(repository, conversation_id)
    with pytest.raises(InvalidOperation, match="slot names are"):
        await repository.update_slot(conversation_id, "bad name!", "x")
    with pytest.raises(InvalidOperation, match="holds a list of items"):
        await repository.update_slot(conversation_id, "todo", "buy milk")
    with pytest.raises(InvalidOperation, match=r"duplicate todo item ids: \['1'\]"):
        await repository.update_slot(conversation_id, "todo", [TODO[0], TODO[0]])
    with pytest.raises(InvalidOperation, match="the useful_info slot holds text"):
        await repository.update_slot(conversation_id, "useful_info", TODO)
    assert await Snapshot.take(repository, conversation_id) == before


async def test_agent_profiles_default_and_configured(
    repository: Repository, conversation_id: str
) -> None:
    assert await repository.agent_profile(conversation_id) == AgentProfile(
        agent_id="main", is_sub_agent=False
    )
    assert await repository.agent_profile(conversation_id, "helper") == AgentProfile(
        agent_id="helper", is_sub_agent=True
    )

    helper = AgentProfile(
        agent_id="helper",
        is_sub_agent=True,
        system_prompt="You search.",
        role_definition="Searcher",
    )
    assert await repository.configure_agent(conversation_id, helper) == 2
    assert await repository.agent_profile(conversation_id, "helper") == helper

    with pytest.raises(InvalidOperation, match="main agent cannot be configured as a sub-agent"):
        await repository.configure_agent(
            conversation_id, AgentProfile(agent_id="main", is_sub_agent=True)
        )
    assert (await repository.get_conversation(conversation_id)).version == 2


async def test_role_definition_slot_updates_the_profile(
    repository: Repository, conversation_id: str
) -> None:
    await repository.update_slot(conversation_id, "role_definition", "Lead engineer")
    await repository.update_slot(
        conversation_id, "role_definition", "Reviewer", agent_id="reviewer"
    )
    configured = AgentProfile(agent_id="helper", is_sub_agent=True, system_prompt="You search.")
    await repository.configure_agent(conversation_id, configured)
    await repository.update_slot(conversation_id, "role_definition", "Searcher", agent_id="helper")

    assert await repository.agent_profile(conversation_id) == AgentProfile(
        agent_id="main", is_sub_agent=False, role_definition="Lead engineer"
    )
    assert await repository.agent_profile(conversation_id, "reviewer") == AgentProfile(
        agent_id="reviewer", is_sub_agent=True, role_definition="Reviewer"
    )
    assert await repository.agent_profile(conversation_id, "helper") == configured.model_copy(
        update={"role_definition": "Searcher"}
    )
    # It lives on the profile, not among the slots.
    assert await repository.context_slots(conversation_id) == ContextSlots()

    await repository.update_slot(conversation_id, "role_definition", None)
    assert (await repository.agent_profile(conversation_id)).role_definition is None


async def test_assemble_builds_from_the_window_profile_and_slots(
    repository: Repository, conversation_id: str
) -> None:
    assembler = pytest.importorskip(
        "store.assembler", reason="store.assembler is not importable yet"
    )
    await repository.configure_agent(
        conversation_id, AgentProfile(agent_id="main", system_prompt="You are the lead.")
    )
    await repository.update_slot(conversation_id, "todo", TODO)
    await repository.append_messages(
        conversation_id,
        [
            user("Fix the bug."),
            assistant("", call("c1", "grep", pattern="bug")),
            tool("c1", "store.py:12"),
            user("secret sub-agent task", agent_id="helper"),
            assistant("Fixed in store.py."),
        ],
    )
    await repository.start_batch(conversation_id, 2)

    assembly = await repository.assemble(conversation_id, format="openai-chat")

    window = await repository.visible_window(conversation_id, agent_id="main")
    expected = assembler.assemble(
        [m.as_message() for m in window],
        profile=await repository.agent_profile(conversation_id),
        slots=await repository.context_slots(conversation_id),
        format="openai-chat",
    )
    assert assembly == expected
    payload_messages = assembly.payload["messages"]
    assert payload_messages[0] == {"role": "system", "content": "You are the lead."}
    rendered = repr(payload_messages)
    assert "secret sub-agent task" not in rendered  # another agent's message
    assert "Fix the bug." not in rendered  # hidden by the new batch
    assert "read the spec" in rendered  # the TODO slot, rendered fresh
    assert "Fixed in store.py." in rendered


async def test_assemble_for_a_sub_agent_needs_a_role_definition(
    repository: Repository, conversation_id: str
) -> None:
    pytest.importorskip("store.assembler", reason="store.assembler is not importable yet")
    await repository.append_messages(conversation_id, [user("search", agent_id="helper")])
    with pytest.raises(ConfigurationError, match="'helper' has no role definition"):
        await repository.assemble(conversation_id, agent_id="helper")

    await repository.update_slot(conversation_id, "role_definition", "Searcher", agent_id="helper")
    assembly = await repository.assemble(conversation_id, agent_id="helper", format="anthropic")
    assert assembly.payload["system"] is not None
    assert "search" in repr(assembly.payload["messages"])
