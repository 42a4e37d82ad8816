"""Property: any conversation × every policy × every format → a payload the
validator accepts, with the same logical sequence in every native format
(or, for a window with nothing to send, `EmptyWindow` exactly where the
format cannot take that). The conversations are `strategies.conversations`;
`test_sdk_types` checks the same payloads against the providers' SDK types."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from store.assembler import (
    ProviderFormat,
    parse_tool_calls,
    validate,
)
from store.domain.context import AgentProfile
from store.domain.messages import Message
from tests.unit.assembler.every_format import every_policy
from tests.unit.assembler.logical import logical_sequence
from tests.unit.assembler.strategies import (
    AssemblyInput,
    assembly_inputs,
)

NATIVE = [f for f in ProviderFormat if f is not ProviderFormat.XML_TOOLS]


@pytest.mark.slow
@settings(max_examples=150, database=None)
@given(drawn=assembly_inputs())
def test_every_policy_and_format_gives_a_valid_payload_with_one_logical_sequence(
    drawn: AssemblyInput,
) -> None:
    agent, profile = drawn.agent, drawn.profile
    for policy, built in every_policy(drawn):
        sequences = {}
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
