"""The public API: shape, determinism, agent isolation, diagnostics."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import store.assembler
from store.assembler import AssembleOptions, Assembly, Diagnostics, ProviderFormat, assemble
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.messages import StoredMessage
from tests.unit.assembler.builders import AC, FOUR_SLOTS, MAIN, A, T, U, build


def test_all_is_complete_and_importable() -> None:
    public = {name for name in dir(store.assembler) if not name.startswith("_")}
    modules = {name for name in public if isinstance(getattr(store.assembler, name), type(store))}
    assert set(store.assembler.__all__) == public - modules
    for name in store.assembler.__all__:
        assert hasattr(store.assembler, name)


def test_the_documented_call_shape() -> None:
    assembly = assemble([U()], profile=MAIN, slots=ContextSlots(), format="openai-chat")
    assert isinstance(assembly, Assembly)
    assert isinstance(assembly.diagnostics, Diagnostics)
    json.dumps(assembly.diagnostics.model_dump(mode="json"))


def test_unknown_format_names_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown provider format 'nope'"):
        build([U()], format="nope")


@pytest.mark.parametrize("format", list(ProviderFormat))
def test_same_input_gives_byte_identical_json(format: ProviderFormat) -> None:
    messages = [U(), A("x", 1, 2), T(2), T(1), U()]

    def render() -> str:
        assembly = build(messages, format=format, slots=FOUR_SLOTS)
        document = {
            "payload": assembly.payload,
            "diagnostics": assembly.diagnostics.model_dump(mode="json"),
        }
        return json.dumps(document)

    assert render() == render()


def test_sub_agent_messages_never_reach_the_main_agent_and_vice_versa() -> None:
    messages = [
        U("main question"),
        U("sub task", agent_id="sub"),
        A("sub answer", agent_id="sub"),
        A("main answer"),
    ]
    main = build(messages, slots=ContextSlots())
    assert [m["content"] for m in main.payload["messages"][1:]] == ["main question", "main answer"]
    profile = AgentProfile(agent_id="sub", is_sub_agent=True, role_definition="helper")
    sub = build(messages, profile=profile, slots=ContextSlots())
    assert [m["content"] for m in sub.payload["messages"][1:3]] == ["sub task", "sub answer"]


def test_fingerprint_is_stable_when_only_the_todo_changes() -> None:
    messages = [U(), AC(1), T(1), AC(2), T(2), AC(3), T(3), AC(4), T(4)]
    todo = (TodoItem(id="1", content="a"),)
    first = build(messages, slots=ContextSlots(todo=todo))
    changed = build(
        messages, slots=ContextSlots(todo=(TodoItem(id="1", content="a", status="completed"),))
    )
    assert first.diagnostics.stable_prefix == changed.diagnostics.stable_prefix
    assert first.payload != changed.payload
    assert first.diagnostics.stable_prefix.message_count == 6  # S U A1 T1 A2 T2


def test_fingerprint_changes_with_the_prefix() -> None:
    one = build([U("a"), AC(1), T(1)])
    two = build([U("b"), AC(1), T(1)])
    assert one.diagnostics.stable_prefix.fingerprint != two.diagnostics.stable_prefix.fingerprint


def test_token_estimate_and_message_count() -> None:
    assembly = build([U(), A()], slots=FOUR_SLOTS)
    assert assembly.diagnostics.message_count == 1 + 2 + 3
    assert assembly.diagnostics.token_estimate > 0


def test_a_token_counter_can_be_plugged_in() -> None:
    def count(text: str) -> int:
        return len(text.split())

    assembly = assemble(
        [U("one two three")],
        profile=MAIN,
        slots=ContextSlots(),
        format="anthropic",
        options=AssembleOptions(token_counter=count),
    )
    assert assembly.diagnostics.token_estimate == (3 + 3) + (
        3 + 3
    )  # system + user, 3 overhead each


def test_options_are_frozen_and_n_defaults_per_policy() -> None:
    options = AssembleOptions(policy="from_end")
    assert options.effective_n == 5
    assert AssembleOptions().effective_n == 3
    with pytest.raises(ValueError, match="frozen"):
        options.n = 2  # type: ignore[misc]


def test_stored_messages_fingerprint_like_plain_messages() -> None:
    plain = [U(), AC(1), T(1), AC(2), T(2), AC(3), T(3)]
    stored = [
        StoredMessage(
            **m.model_dump(), seq=i + 10, batch=2, recorded_at=datetime(2026, 1, 1, tzinfo=UTC)
        )
        for i, m in enumerate(plain)
    ]
    assert build(plain).diagnostics.stable_prefix == build(stored).diagnostics.stable_prefix  # type: ignore[arg-type]
