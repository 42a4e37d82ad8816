"""System prompt and role definition (docs/behaviours.md §2)."""

from __future__ import annotations

import pytest

from store.assembler.system_prompt import choose_system_prompt
from store.domain.context import AgentProfile, ContextSlots
from store.domain.errors import ConfigurationError
from tests.unit.assembler.builders import U, build, shape


def test_main_agent_custom_prompt_is_the_system_message() -> None:
    profile = AgentProfile(system_prompt="custom", role_definition="role")
    assembly = build([U()], profile=profile, slots=ContextSlots())
    assert assembly.payload["messages"][0] == {"role": "system", "content": "custom"}
    assert assembly.diagnostics.system_prompt_source == "custom"
    # The role definition still heads the special block.
    assert assembly.messages[2].content == "## Agent Role Definition\n\nrole"


def test_main_agent_role_definition_is_promoted_and_kept_as_special_user() -> None:
    profile = AgentProfile(role_definition="role")
    assembly = build([U()], profile=profile, slots=ContextSlots())
    messages = assembly.payload["messages"]
    assert messages[0] == {"role": "system", "content": "role"}
    assert messages[2] == {"role": "user", "content": "## Agent Role Definition\n\nrole"}
    assert assembly.diagnostics.system_prompt_source == "role_definition"


def test_main_agent_with_neither_has_no_system_message() -> None:
    assembly = build([U()], profile=AgentProfile(), slots=ContextSlots(useful_info="i"))
    assert shape(assembly) == ["U", "SP"]
    assert assembly.payload["messages"][0]["role"] == "user"
    assert assembly.diagnostics.system_prompt_source is None


def test_sub_agent_without_role_definition_is_a_configuration_error() -> None:
    profile = AgentProfile(agent_id="reviewer", is_sub_agent=True, system_prompt="p")
    with pytest.raises(ConfigurationError, match="sub-agent 'reviewer' has no role definition"):
        build([U(agent_id="reviewer")], profile=profile)


def test_sub_agent_role_definition_promoted_and_kept() -> None:
    profile = AgentProfile(agent_id="reviewer", is_sub_agent=True, role_definition="review")
    assembly = build(
        [U(agent_id="reviewer")], profile=profile, slots=ContextSlots(folder_notes="n")
    )
    assert assembly.payload["messages"][0] == {"role": "system", "content": "review"}
    assert [m.metadata.get("special_slot") for m in assembly.messages[2:]] == [
        "role_definition",
        "folder_notes",
    ]


def test_sub_agent_custom_prompt_wins() -> None:
    profile = AgentProfile(agent_id="r", is_sub_agent=True, system_prompt="p", role_definition="x")
    choice = choose_system_prompt(profile)
    assert (choice.text, choice.source, choice.role_definition) == ("p", "custom", "x")


def test_blank_prompt_counts_as_unset() -> None:
    choice = choose_system_prompt(AgentProfile(system_prompt="  ", role_definition="role"))
    assert (choice.text, choice.source) == ("role", "role_definition")
