"""The standalone validator: one failing payload per numbered rule, and our
own payloads pass."""

from __future__ import annotations

from typing import Any

import pytest

from store.assembler import InvalidPayload, ProviderFormat, ensure_valid, validate
from tests.unit.assembler.builders import AC, FOUR_SLOTS, A, R, T, U, build


def rules(format: str, payload: dict[str, Any]) -> list[str]:
    return [violation.rule for violation in validate(format, payload)]


def call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"messages": list(messages)}


ASSISTANT_1 = {"role": "assistant", "content": None, "tool_calls": [call("1")]}
TOOL_1 = {"role": "tool", "tool_call_id": "1", "content": "r"}


@pytest.mark.parametrize("format", list(ProviderFormat))
def test_assembled_payloads_are_valid(format: ProviderFormat) -> None:
    messages = [U(), A("", 1, 2), R(), T(1), U(), AC(3), T(3), A("done")]
    ensure_valid(format, build(messages, format=format, slots=FOUR_SLOTS).payload)


def test_O1_unknown_role() -> None:
    assert rules("openai-chat", chat({"role": "robot", "content": "x"})) == ["O1"]


def test_O2_call_not_followed_by_its_results() -> None:
    payload = chat(ASSISTANT_1, {"role": "user", "content": "x"})
    violations = validate("openai-chat", payload)
    assert [v.rule for v in violations] == ["O2"]
    assert "did not have response messages: 1" in violations[0].message
    assert violations[0].where == "messages[1]"


def test_O2_call_unanswered_at_the_end() -> None:
    assert rules("openai-chat", chat(ASSISTANT_1)) == ["O2"]


def test_O3_tool_message_without_a_preceding_call() -> None:
    assert rules("openai-chat", chat({"role": "user", "content": "x"}, TOOL_1)) == ["O3"]


def test_O4_null_content_without_tool_calls() -> None:
    assert rules("openai-chat", chat({"role": "assistant", "content": None})) == ["O4"]


def test_O5_duplicate_tool_call_ids() -> None:
    assert rules("openai-chat", chat(ASSISTANT_1, TOOL_1, ASSISTANT_1, TOOL_1)) == ["O5"]


def test_O6_system_message_inside_a_tool_block() -> None:
    assert rules("openai-chat", chat(ASSISTANT_1, {"role": "system", "content": "r"}, TOOL_1)) == [
        "O2",
        "O6",
        "O3",
    ]


FUNCTION_CALL = {"type": "function_call", "call_id": "1", "name": "f", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "1", "output": "r"}
ASSISTANT_ITEM = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "x"}],
}
REASONING = {"type": "reasoning", "id": "rs", "summary": []}


def test_R1_output_without_an_earlier_call() -> None:
    assert rules("openai-responses", {"input": [OUTPUT, FUNCTION_CALL]}) == ["R1", "R2"]


def test_R2_call_without_output_before_the_next_model_turn() -> None:
    violations = validate("openai-responses", {"input": [FUNCTION_CALL, ASSISTANT_ITEM, OUTPUT]})
    assert [v.rule for v in violations] == ["R2"]
    assert violations[0].where == "input[0]"


def test_R3_reasoning_not_followed_by_its_item() -> None:
    assert rules("openai-responses", {"input": [REASONING, OUTPUT]}) == ["R3", "R1"]
    assert rules("openai-responses", {"input": [REASONING]}) == ["R3"]


def test_R5_empty_instructions() -> None:
    assert rules("openai-responses", {"instructions": " ", "input": []}) == ["R5"]


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


USE = {"type": "tool_use", "id": "1", "name": "f", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "1", "content": "r"}


def turns(*pairs: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"messages": [{"role": role, "content": content} for role, content in pairs]}


def test_A1_role_other_than_user_or_assistant() -> None:
    assert rules("anthropic", turns(("user", [text("a")]), ("system", [text("b")]))) == ["A1"]


def test_A2_first_message_not_user() -> None:
    assert rules("anthropic", turns(("assistant", [text("a")]))) == ["A2"]


def test_A3_roles_do_not_alternate() -> None:
    assert rules("anthropic", turns(("user", [text("a")]), ("user", [text("b")]))) == ["A3"]


def test_A4_tool_use_without_results_immediately_after() -> None:
    payload = turns(("user", [text("a")]), ("assistant", [USE]), ("user", [text("b")]))
    assert rules("anthropic", payload) == ["A4"]


def test_A4_tool_result_without_tool_use_before() -> None:
    payload = turns(("user", [text("a")]), ("assistant", [text("b")]), ("user", [RESULT]))
    assert rules("anthropic", payload) == ["A4"]


def test_A5_tool_result_after_text() -> None:
    payload = turns(("user", [text("a")]), ("assistant", [USE]), ("user", [text("b"), RESULT]))
    assert rules("anthropic", payload) == ["A5"]


def test_A7_empty_text_block() -> None:
    assert rules("anthropic", turns(("user", [text(" ")]))) == ["A7"]


def test_A7_trailing_whitespace_on_the_final_assistant() -> None:
    assert rules("anthropic", turns(("user", [text("a")]), ("assistant", [text("b ")]))) == ["A7"]


def test_A8_more_than_four_breakpoints_and_bad_ttl() -> None:
    marked = {**text("a"), "cache_control": {"type": "ephemeral"}}
    payload = turns(("user", [marked] * 5))
    assert rules("anthropic", payload) == ["A8"]
    bad_ttl = {**text("a"), "cache_control": {"type": "ephemeral", "ttl": "2h"}}
    assert rules("anthropic", turns(("user", [bad_ttl]))) == ["A8"]


def test_A9_thinking_not_first() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    payload = turns(("user", [text("a")]), ("assistant", [text("b"), thinking]))
    assert rules("anthropic", payload) == ["A9"]


def gemini(*contents: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"contents": [{"role": role, "parts": parts} for role, parts in contents]}


CALL_PART = {"functionCall": {"id": "1", "name": "f", "args": {}}}
RESPONSE_PART = {"functionResponse": {"id": "1", "name": "f", "response": {}}}


def test_G1_system_role_in_contents() -> None:
    assert rules("gemini", gemini(("system", [{"text": "a"}]))) == ["G1"]


def test_G2_function_call_turn_not_after_a_user_turn() -> None:
    payload = gemini(("model", [CALL_PART]), ("user", [RESPONSE_PART]))
    assert rules("gemini", payload) == ["G2"]


def test_G3_responses_do_not_match_the_calls() -> None:
    payload = gemini(("user", [{"text": "a"}]), ("model", [CALL_PART]), ("user", [{"text": "b"}]))
    assert rules("gemini", payload) == ["G3"]


def test_xml_rules() -> None:
    assert rules("xml-tools", chat({"role": "tool", "tool_call_id": "1", "content": "r"})) == [
        "O1",
        "X1",
    ]
    assert rules(
        "xml-tools", chat({"role": "user", "content": "a"}, {"role": "user", "content": "b"})
    ) == ["X2"]
    assert rules("xml-tools", chat({"role": "assistant", "content": None})) == ["O4"]


def test_ensure_valid_raises_with_every_violation_named() -> None:
    with pytest.raises(InvalidPayload, match=r"O2 at messages\[1\]") as raised:
        ensure_valid("openai-chat", chat(ASSISTANT_1, {"role": "user", "content": "x"}))
    assert [v.rule for v in raised.value.violations] == ["O2"]
