"""What no provider can take, made sendable before anything else: reused
call ids and non-finite argument numbers (docs/assembler.md, "Provider
details")."""

from __future__ import annotations

import pytest

from store.assembler import EmptyWindow, ProviderFormat, RepairKind, validate
from store.assembler.sanitize import finite, sanitize_window
from store.domain.context import AgentProfile, ContextSlots
from store.domain.inputs import STORED
from store.domain.messages import Message, ToolCall
from tests.unit.assembler.builders import AC, T, U, build, shape


def test_a_reused_id_is_renamed_with_the_results_that_follow_it() -> None:
    window = [U(), AC(1), T(1), AC(1), T(1, "second")]
    fixed, repairs = sanitize_window(window)
    assert [c.id for c in fixed[1].tool_calls] == ["c1"]
    assert fixed[2].tool_call_id == "c1"
    assert [c.id for c in fixed[3].tool_calls] == ["c1_2"]
    assert fixed[4].tool_call_id == "c1_2"
    [repair] = repairs
    assert (repair.kind, repair.message_index) == (RepairKind.RENAMED_DUPLICATE_TOOL_ID, 3)
    assert "'c1_2'" in repair.detail


def test_a_new_name_skips_the_ids_the_window_uses() -> None:
    window = [AC(1), T(1), AC("1_2"), T("1_2"), AC(1), T(1)]
    fixed, _ = sanitize_window(window)
    assert [m.tool_calls[0].id for m in fixed if m.tool_calls] == ["c1", "c1_2", "c1_3"]
    assert [m.tool_call_id for m in fixed if m.role == "tool"] == ["c1", "c1_2", "c1_3"]


def test_a_result_answers_the_most_recent_call_with_its_id() -> None:
    # The first call's result arrives after the second call: it is bound to
    # the second, and the first gets the interrupted placeholder.
    assembly = build([U(), AC(1), AC(1), T(1)], policy="tail")
    assert shape(assembly)[1:5] == ["U", "A[1]", "T1", "A[1_2]"]
    assert assembly.messages[3].metadata.get("synthesized") is True
    assert assembly.messages[5].tool_call_id == "c1_2"


@pytest.mark.parametrize("format", list(ProviderFormat))
def test_reused_ids_give_a_valid_payload_in_every_format(format: ProviderFormat) -> None:
    messages = [U(), AC(1, 2), T(1), T(2), U("more"), AC(2, 1), T(2), T(1)]
    assembly = build(messages, format=format)
    assert validate(format, assembly.payload) == []


def test_non_finite_numbers_become_text_wherever_they_are() -> None:
    value = {"a": float("nan"), "b": [1.5, float("inf"), {"c": float("-inf")}], "d": "x"}
    assert finite(value) == {"a": "NaN", "b": [1.5, "Infinity", {"c": "-Infinity"}], "d": "x"}
    call = ToolCall.model_validate({"id": "c1", "name": "f", "arguments": value}, context=STORED)
    fixed, repairs = sanitize_window([Message(role="assistant", tool_calls=(call,))])
    assert fixed[0].tool_calls[0].arguments == finite(value)
    [repair] = repairs
    assert repair.kind is RepairKind.REPLACED_NON_FINITE_NUMBER
    assert "/a, /b/1, /b/2/c" in repair.detail


def test_a_clean_window_is_returned_as_it_is() -> None:
    window = [U(), AC(1, 2), T(1), T(2)]
    fixed, repairs = sanitize_window(window)
    assert repairs == []
    assert all(a is b for a, b in zip(fixed, window, strict=True))


# --- the empty window --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("format", "why"),
    [
        ("openai-responses", "OpenAI Responses refuses a request without input"),
        ("anthropic", "Anthropic needs at least one message"),
        ("gemini", "Gemini needs at least one content"),
    ],
)
def test_an_empty_window_is_refused_where_nothing_may_be_sent(format: str, why: str) -> None:
    with pytest.raises(EmptyWindow, match=why) as raised:
        build([], format=format, slots=ContextSlots())
    assert raised.value.format == format
    assert "agent 'main' has no visible message and no context slot" in str(raised.value)


def test_another_agents_messages_do_not_fill_a_window() -> None:
    with pytest.raises(EmptyWindow):
        build([U("for the helper", agent_id="helper")], format="anthropic", slots=ContextSlots())


def test_without_a_system_prompt_openai_chat_refuses_too_and_xml_sends_its_instruction() -> None:
    with pytest.raises(EmptyWindow, match="no system prompt either"):
        build([], profile=AgentProfile(), slots=ContextSlots())
    payload = build([], format="xml-tools", profile=AgentProfile(), slots=ContextSlots()).payload
    assert [m["role"] for m in payload["messages"]] == ["user"]
    with pytest.raises(EmptyWindow):
        build(
            [], format="xml-tools", profile=AgentProfile(), slots=ContextSlots(),
            xml_final_instruction=None,
        )  # fmt: skip


def test_a_context_slot_alone_is_something_to_send() -> None:
    assembly = build([], format="anthropic", profile=AgentProfile())
    assert assembly.payload["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "## Useful Information\n\nfacts"}]}
    ]  # nothing before the special block: no breakpoint
