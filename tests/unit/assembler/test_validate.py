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
    "id": "msg_1",
    "status": "completed",
    "content": [{"type": "output_text", "text": "x", "annotations": []}],
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


USER_ITEM = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}


def test_R5_empty_instructions() -> None:
    assert rules("openai-responses", {"instructions": " ", "input": [USER_ITEM]}) == ["R5"]


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


# --- the rules the SDK types and the providers enforce beyond provider-rules.md ---


def test_O7_empty_messages() -> None:
    assert rules("openai-chat", chat()) == ["O7"]
    assert rules("openai-chat", {}) == ["O7"]


def test_O8_tool_call_id_over_40_characters() -> None:
    long = "c" * 41
    assistant = {"role": "assistant", "content": None, "tool_calls": [call(long)]}
    tool = {"role": "tool", "tool_call_id": long, "content": "r"}
    assert rules("openai-chat", chat(assistant, tool)) == ["O8", "O8"]
    assert rules("openai-chat", chat({**ASSISTANT_1, "tool_calls": [call("c" * 40)]})) == ["O2"]


@pytest.mark.parametrize("arguments", ['{"x": NaN}', '{"x": 1e999}', "[1]", "{", 7])
def test_O9_arguments_not_a_strict_json_object(arguments: Any) -> None:
    broken = {"id": "1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    assistant = {"role": "assistant", "content": None, "tool_calls": [broken]}
    assert rules("openai-chat", chat(assistant, TOOL_1)) == ["O9"]


def test_O10_a_second_result_for_one_call() -> None:
    assert rules("openai-chat", chat(ASSISTANT_1, TOOL_1, TOOL_1)) == ["O10"]


def test_R6_empty_input() -> None:
    assert rules("openai-responses", {"input": []}) == ["R6"]
    assert rules("openai-responses", {"instructions": "be brief"}) == ["R6"]


def test_R7_duplicate_call_ids_and_item_ids() -> None:
    again = [FUNCTION_CALL, OUTPUT, FUNCTION_CALL, OUTPUT]
    assert rules("openai-responses", {"input": [USER_ITEM, *again]}) == ["R7", "R8"]
    items = [USER_ITEM, ASSISTANT_ITEM, USER_ITEM, ASSISTANT_ITEM]
    violations = validate("openai-responses", {"input": items})
    assert [v.rule for v in violations] == ["R7"]
    assert violations[0].message == "Duplicate item found with id msg_1"


def test_R8_a_second_output_for_one_call() -> None:
    payload = {"input": [USER_ITEM, FUNCTION_CALL, OUTPUT, OUTPUT]}
    assert rules("openai-responses", payload) == ["R8"]


def test_R9_arguments_not_strict_json() -> None:
    broken = {**FUNCTION_CALL, "arguments": '{"x": Infinity}'}
    assert rules("openai-responses", {"input": [USER_ITEM, broken, OUTPUT]}) == ["R9"]


def test_R10_call_id_over_64_characters() -> None:
    long = "c" * 65
    items = [USER_ITEM, {**FUNCTION_CALL, "call_id": long}, {**OUTPUT, "call_id": long}]
    assert rules("openai-responses", {"input": items}) == ["R10", "R10"]


def test_R11_assistant_output_message_without_id_or_status() -> None:
    bare = {k: v for k, v in ASSISTANT_ITEM.items() if k not in {"id", "status"}}
    assert rules("openai-responses", {"input": [USER_ITEM, bare]}) == ["R11"]
    not_msg = {**ASSISTANT_ITEM, "id": "item_1"}
    assert rules("openai-responses", {"input": [USER_ITEM, not_msg]}) == ["R11"]
    easy = {"type": "message", "role": "assistant", "content": "plain text"}
    assert rules("openai-responses", {"input": [USER_ITEM, easy]}) == []


def test_A7_blank_tool_result() -> None:
    blank = {**RESULT, "content": "  "}
    payload = turns(("user", [text("a")]), ("assistant", [USE]), ("user", [blank]))
    assert rules("anthropic", payload) == ["A7"]
    empty_text = {**RESULT, "content": [text(" ")]}
    payload = turns(("user", [text("a")]), ("assistant", [USE]), ("user", [empty_text]))
    assert rules("anthropic", payload) == ["A7"]


def test_A11_empty_messages() -> None:
    assert rules("anthropic", {"messages": []}) == ["A11"]


def test_A12_tool_ids_outside_the_pattern() -> None:
    use = {**USE, "id": "functions.ls:0"}
    result = {**RESULT, "tool_use_id": "functions.ls:0"}
    payload = turns(("user", [text("a")]), ("assistant", [use]), ("user", [result]))
    violations = validate("anthropic", payload)
    assert [v.rule for v in violations] == ["A12", "A12"]
    assert violations[0].where == "messages[1].content[0].id"


def test_A13_duplicate_tool_use_ids() -> None:
    payload = turns(
        ("user", [text("a")]),
        ("assistant", [USE]),
        ("user", [RESULT]),
        ("assistant", [USE]),
        ("user", [RESULT]),
    )
    assert rules("anthropic", payload) == ["A13"]


def test_A14_cache_control_on_thinking() -> None:
    mark = {"cache_control": {"type": "ephemeral"}}
    for block in (
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "redacted_thinking", "data": "d"},
    ):
        payload = turns(("user", [text("a")]), ("assistant", [{**block, **mark}, text("b")]))
        assert rules("anthropic", payload) == ["A14"]


def test_G7_empty_contents() -> None:
    assert rules("gemini", {"contents": []}) == ["G7"]


def test_G8_content_without_parts() -> None:
    assert rules("gemini", gemini(("user", [{"text": "a"}]), ("model", []))) == ["G8"]


def test_G9_orphan_function_response() -> None:
    assert rules("gemini", gemini(("user", [RESPONSE_PART]))) == ["G9"]
    payload = gemini(
        ("user", [{"text": "a"}]), ("model", [{"text": "b"}]), ("user", [RESPONSE_PART])
    )
    assert rules("gemini", payload) == ["G9"]


def test_G11_bytes_that_are_not_base64() -> None:
    signed = {"text": "b", "thoughtSignature": "g-sig"}
    assert rules("gemini", gemini(("user", [{"text": "a"}]), ("model", [signed]))) == ["G11"]
    image = {"inlineData": {"mimeType": "image/png", "data": "ab+/cd=="}}
    assert rules("gemini", gemini(("user", [image]))) == ["G11"]
    good = {"inlineData": {"mimeType": "image/png", "data": "aGk="}}
    assert rules("gemini", gemini(("user", [good]))) == []


def test_X3_empty_messages() -> None:
    assert rules("xml-tools", chat()) == ["X3"]


@pytest.mark.parametrize("format", list(ProviderFormat))
def test_J1_non_finite_numbers_anywhere(format: ProviderFormat) -> None:
    payload: dict[str, Any] = {"messages": [], "input": [], "contents": [], "extra": [float("inf")]}
    violations = validate(format, payload)
    assert violations[-1].rule == "J1"
    assert violations[-1].where == "extra[0]"
