"""Assemble one input in every format, checking the empty-window decision:
a format raises `EmptyWindow` exactly when it has nothing it may send.

With no message in the history and no special block, OpenAI Responses,
Anthropic and Gemini always refuse (nothing is invented for them); OpenAI
Chat still sends the system prompt alone when there is one, and xml-tools
the system prompt or its final instruction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from store.assembler import (
    AssembleOptions,
    Assembly,
    EmptyWindow,
    PlacementPolicy,
    ProviderFormat,
    assemble,
)
from store.assembler.system_prompt import choose_system_prompt
from store.domain.context import AgentProfile, ContextSlots
from store.domain.errors import ConfigurationError
from store.domain.messages import Message
from tests.unit.assembler.strategies import AssemblyInput

ALWAYS_REFUSE_EMPTY = {
    ProviderFormat.OPENAI_RESPONSES,
    ProviderFormat.ANTHROPIC,
    ProviderFormat.GEMINI,
}


def expected_empty(*, has_system_prompt: bool, final_instruction: bool) -> set[ProviderFormat]:
    """The formats that refuse a window with nothing to send."""
    refused = set(ALWAYS_REFUSE_EMPTY)
    if not has_system_prompt:
        refused.add(ProviderFormat.OPENAI_CHAT)
        if not final_instruction:
            refused.add(ProviderFormat.XML_TOOLS)
    return refused


def assemble_every_format(
    messages: Sequence[Message],
    *,
    profile: AgentProfile,
    slots: ContextSlots,
    options: AssembleOptions,
) -> dict[ProviderFormat, Assembly]:
    """Every format's assembly; the formats that raised `EmptyWindow` are
    left out, once checked to be exactly those that had to."""
    built: dict[ProviderFormat, Assembly] = {}
    refused: dict[ProviderFormat, EmptyWindow] = {}
    for format in ProviderFormat:
        try:
            built[format] = assemble(
                messages, profile=profile, slots=slots, format=format, options=options
            )
        except EmptyWindow as error:
            refused[format] = error
    has_system_prompt = choose_system_prompt(profile).text is not None
    # The neutral list is the same for every format.
    neutral = next(iter(built.values())).messages if built else ()
    nothing = len(neutral) == int(has_system_prompt)
    expected = (
        expected_empty(
            has_system_prompt=has_system_prompt,
            final_instruction=bool(options.xml_final_instruction),
        )
        if nothing
        else set()
    )
    assert set(refused) == expected, (sorted(refused), sorted(expected), neutral)
    for format, refusal in refused.items():
        assert isinstance(refusal, ConfigurationError)
        assert refusal.format == format.value
        assert "\n" not in str(refusal)
        assert format.value in str(refusal)
    return built


def every_policy(
    drawn: AssemblyInput,
) -> Iterator[tuple[PlacementPolicy, dict[ProviderFormat, Assembly]]]:
    """`drawn` assembled in every format under each placement policy."""
    for policy in PlacementPolicy:
        options = drawn.options.model_copy(update={"policy": policy})
        yield (
            policy,
            assemble_every_format(
                drawn.messages, profile=drawn.profile, slots=drawn.slots, options=options
            ),
        )
