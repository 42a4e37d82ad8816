"""Property: any conversation × every policy × every format → a payload the
validator accepts, with the same logical sequence in every native format
(or, for a window with nothing to send, `EmptyWindow` exactly where the
format cannot take that). The conversations are `strategies.conversations`;
`test_sdk_types` checks the same payloads against the providers' SDK types."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.assembler import (
    AssembleOptions,
    PlacementPolicy,
    ProviderFormat,
    parse_tool_calls,
    validate,
)
from store.domain.context import AgentProfile, ContextSlots
from store.domain.messages import Message
from tests.unit.assembler.every_format import assemble_every_format
from tests.unit.assembler.logical import logical_sequence
from tests.unit.assembler.strategies import conversations, option_values, profiles_for, slot_values

NATIVE = [f for f in ProviderFormat if f is not ProviderFormat.XML_TOOLS]


@pytest.mark.slow
@settings(max_examples=150, database=None)
@given(data=st.data(), conversation=conversations(), slots=slot_values, options=option_values)
def test_every_policy_and_format_gives_a_valid_payload_with_one_logical_sequence(
    data: st.DataObject,
    conversation: tuple[list[Message], str],
    slots: ContextSlots,
    options: AssembleOptions,
) -> None:
    messages, agent = conversation
    profile = data.draw(profiles_for[agent])
    for policy in PlacementPolicy:
        policy_options = options.model_copy(update={"policy": policy})
        sequences = {}
        built = assemble_every_format(
            messages, profile=profile, slots=slots, options=policy_options
        )
        for format, assembly in built.items():
            assert validate(format, assembly.payload) == [], (format, policy)
            assert all(m.agent_id == agent for m in assembly.messages)
            _check_placement(assembly.messages, profile, assembly.diagnostics.special_block.index)
            assembly.diagnostics.model_dump(mode="json")
            if format in NATIVE:
                sequences[format] = logical_sequence(format, assembly.payload)
            else:
                _check_xml_calls(assembly.payload, assembly.messages)
        first = next(iter(sequences.values()), None)
        for format, sequence in sequences.items():
            assert sequence == first, (format, policy)


def _check_placement(
    neutral: tuple[Message, ...], profile: AgentProfile, index: int | None
) -> None:
    special = [i for i, m in enumerate(neutral) if "special_slot" in m.metadata]
    if special:
        assert special == list(range(special[0], special[0] + len(special)))  # one contiguous block
        assert special[0] == index
    if profile.system_prompt or profile.role_definition:
        assert neutral[0].role == "system"
        assert index != 0
    if special and special[-1] + 1 < len(neutral):
        assert neutral[special[-1] + 1].role != "tool"  # never inside a tool block


def _check_xml_calls(payload: dict[str, Any], neutral: tuple[Message, ...]) -> None:
    expected = [(c.name, c.arguments) for m in neutral for c in m.tool_calls if c.arguments]
    parsed = [
        (c.name, c.arguments)
        for m in payload["messages"]
        if m["role"] == "assistant"
        for c in parse_tool_calls(m["content"])
    ]
    assert parsed == expected
