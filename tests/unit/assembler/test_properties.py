"""Property: any conversation × every policy × every format → a payload the
validator accepts, with the same logical sequence in every native format."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.assembler import (
    AssembleOptions,
    PlacementPolicy,
    ProviderFormat,
    ReminderStyle,
    assemble,
    parse_tool_calls,
    validate,
)
from store.context import AgentProfile, ContextSlots, TodoItem
from store.messages import ImagePart, Message, MessageKind, Reasoning, TextPart, ToolCall
from tests.unit.assembler.logical import logical_sequence

words = st.from_regex(r"[a-z]{1,6}( [a-z]{1,6}){0,2}", fullmatch=True)
padded = st.tuples(words, st.sampled_from(["", " ", "\n"])).map(lambda t: t[0] + t[1])
scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | words
argument_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(
    st.from_regex(r"[a-z]{1,5}", fullmatch=True), argument_values, max_size=3
)
images = st.sampled_from(
    [ImagePart(url="https://example.com/a.png"), ImagePart(data="aGk=", media_type="image/png")]
)
reasoning = st.lists(
    st.sampled_from(
        [
            Reasoning(provider="anthropic", text="think", signature="sig"),
            Reasoning(provider="anthropic", data="opaque", redacted=True),
            Reasoning(provider="openai", item_id="rs_1", text="summary", data="enc"),
            Reasoning(provider="gemini", signature="g-sig"),
        ]
    ),
    max_size=2,
    unique=True,
)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[Message], str]:
    agent = draw(st.sampled_from(["main", "sub"]))
    other = "sub" if agent == "main" else "main"
    messages: list[Message] = []
    next_id = 0
    for _ in range(draw(st.integers(0, 12))):
        step = draw(
            st.sampled_from(
                [
                    "user",
                    "user",
                    "assistant",
                    "round",
                    "round",
                    "reminder",
                    "summary",
                    "orphan",
                    "other",
                ]
            )
        )
        if step == "user":
            if draw(st.booleans()):
                content: Any = draw(padded)
            else:
                parts = [TextPart(text=draw(words)), draw(images), TextPart(text=" ")]
                content = tuple(parts[: draw(st.integers(1, 3))])
            kind = draw(st.sampled_from([MessageKind.INPUT, MessageKind.SUMMARY]))
            messages.append(Message(role="user", content=content, kind=kind, agent_id=agent))
        elif step == "assistant":
            messages.append(
                Message(
                    role="assistant",
                    content=draw(padded),
                    reasoning=tuple(draw(reasoning)),
                    agent_id=agent,
                )
            )
        elif step == "round":
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                calls.append(
                    ToolCall(
                        id=f"call{next_id}",
                        name=draw(st.sampled_from(["ls", "cat"])),
                        arguments=draw(arguments),
                    )
                )
                next_id += 1
            text = draw(st.sampled_from(["", "let me check"]))
            messages.append(
                Message(
                    role="assistant",
                    content=text,
                    tool_calls=tuple(calls),
                    reasoning=tuple(draw(reasoning)),
                    agent_id=agent,
                )
            )
            answered = draw(st.permutations(calls))[: draw(st.integers(0, len(calls)))]
            for call in answered:
                if draw(st.integers(0, 4)) == 0:
                    messages.append(
                        Message(
                            role="system",
                            kind=MessageKind.REMINDER,
                            content=draw(words),
                            agent_id=agent,
                        )
                    )
                output = draw(st.sampled_from(["", "done", '{"ok": true}', "[1, 2]"]))
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        content=output,
                        is_error=draw(st.booleans()),
                        agent_id=agent,
                    )
                )
                if draw(st.integers(0, 9)) == 0:  # a retried tool reported twice
                    messages.append(
                        Message(role="tool", tool_call_id=call.id, content="again", agent_id=agent)
                    )
        elif step == "reminder":
            messages.append(
                Message(
                    role="system", kind=MessageKind.REMINDER, content=draw(words), agent_id=agent
                )
            )
        elif step == "summary":
            messages.append(
                Message(
                    role="system", kind=MessageKind.SUMMARY, content=draw(words), agent_id=agent
                )
            )
        elif step == "orphan":
            messages.append(
                Message(role="tool", tool_call_id=f"lost{next_id}", content="late", agent_id=agent)
            )
            next_id += 1
        else:
            messages.append(Message(role="user", content=draw(words), agent_id=other))
    return messages, agent


profiles_for = {
    "main": st.builds(
        AgentProfile,
        agent_id=st.just("main"),
        system_prompt=st.none() | words,
        role_definition=st.none() | words,
    ),
    "sub": st.builds(
        AgentProfile,
        agent_id=st.just("sub"),
        is_sub_agent=st.just(True),
        system_prompt=st.none() | words,
        role_definition=words,
    ),
}
slot_values = st.builds(
    ContextSlots,
    todo=st.lists(
        st.builds(
            TodoItem,
            id=st.from_regex(r"[0-9]{1,2}", fullmatch=True),
            content=words,
            status=st.sampled_from(["pending", "in_progress", "completed"]),
        ),
        max_size=2,
    ).map(tuple),
    useful_info=st.none() | words,
    folder_notes=st.none() | words,
    custom=st.dictionaries(st.sampled_from(["alpha", "beta"]), words, max_size=2),
)
option_values = st.builds(
    AssembleOptions,
    n=st.none() | st.integers(1, 6),
    merge_same_role=st.booleans(),
    reminder_style=st.sampled_from(list(ReminderStyle)),
    token_budget=st.none() | st.integers(20, 400),
)
NATIVE = [f for f in ProviderFormat if f is not ProviderFormat.XML_TOOLS]


@settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
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
        for format in ProviderFormat:
            assembly = assemble(
                messages, profile=profile, slots=slots, format=format, options=policy_options
            )
            assert validate(format, assembly.payload) == [], (format, policy)
            assert all(m.agent_id == agent for m in assembly.messages)
            _check_placement(assembly.messages, profile, assembly.diagnostics.special_block.index)
            assembly.diagnostics.model_dump(mode="json")
            if format in NATIVE:
                sequences[format] = logical_sequence(format, assembly.payload)
            else:
                _check_xml_calls(assembly.payload, assembly.messages)
        first = sequences[ProviderFormat.OPENAI_CHAT]
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
