"""Gemini generateContent rendering."""

from __future__ import annotations

import json

from store.assembler import validate
from store.domain.context import ContextSlots
from store.domain.messages import ImagePart, Message, Reasoning, TextPart, ToolCall
from tests.unit.assembler.builders import AC, A, T, U, build

NO_SLOTS = ContextSlots()


def test_system_instruction_and_model_role() -> None:
    payload = build([U(), A("hi")], format="gemini", slots=NO_SLOTS).payload
    assert payload["systemInstruction"] == {"parts": [{"text": "You are helpful."}]}
    assert [c["role"] for c in payload["contents"]] == ["user", "model"]


def test_calls_and_all_results_of_a_block_in_one_user_content() -> None:
    messages = [U(), AC(1, 2), T(1, '{"files": 2}'), T(2, "plain"), U("more")]
    payload = build(messages, format="gemini", slots=NO_SLOTS).payload
    assert payload["contents"][1]["parts"] == [
        {"functionCall": {"id": "c1", "name": "tool1", "args": {"n": 1}}},
        {"functionCall": {"id": "c2", "name": "tool2", "args": {"n": 2}}},
    ]
    assert payload["contents"][2]["parts"] == [
        {"functionResponse": {"id": "c1", "name": "tool1", "response": {"files": 2}}},
        {"functionResponse": {"id": "c2", "name": "tool2", "response": {"output": "plain"}}},
        {"text": "more"},
    ]


def test_error_results_are_wrapped_as_error() -> None:
    payload = build(
        [U(), AC(1), T(1, "boom", is_error=True)], format="gemini", slots=NO_SLOTS
    ).payload
    assert payload["contents"][2]["parts"][0]["functionResponse"]["response"] == {"error": "boom"}


def test_thought_signature_is_replayed_on_the_first_function_call() -> None:
    reasoning = (Reasoning(provider="gemini", signature="SIG"),)
    payload = build([U(), A("x", 1, 2, reasoning=reasoning), T(1), T(2)], format="gemini").payload
    parts = payload["contents"][1]["parts"]
    assert "thoughtSignature" not in parts[0]
    assert parts[1]["thoughtSignature"] == "SIG"
    assert "thoughtSignature" not in parts[2]


def test_thought_signature_without_calls_goes_on_the_last_part() -> None:
    reasoning = (Reasoning(provider="gemini", signature="SIG"),)
    payload = build([U(), A("x", reasoning=reasoning)], format="gemini", slots=NO_SLOTS).payload
    assert payload["contents"][1]["parts"] == [{"text": "x", "thoughtSignature": "SIG"}]


def test_images_become_inline_or_file_data() -> None:
    content = (
        ImagePart(data="aGk=", media_type="image/png"),
        ImagePart(url="gs://b/a.png", media_type="image/png"),
        TextPart(text="?"),
    )
    payload = build(
        [Message(role="user", content=content)], format="gemini", slots=NO_SLOTS
    ).payload
    assert payload["contents"][0]["parts"][:2] == [
        {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
        {"fileData": {"fileUri": "gs://b/a.png", "mimeType": "image/png"}},
    ]


def test_a_history_starting_with_the_model_gets_a_user_turn() -> None:
    payload = build([AC(1), T(1)], format="gemini", slots=NO_SLOTS).payload
    assert payload["contents"][0] == {
        "role": "user",
        "parts": [{"text": "(conversation continues)"}],
    }


def test_results_and_the_user_words_after_them_are_one_content_not_a_repair() -> None:
    assembly = build([U(), AC(1, 2), T(1), T(2), U("more")], format="gemini", slots=NO_SLOTS)
    assert [len(c["parts"]) for c in assembly.payload["contents"]] == [1, 2, 3]
    assert assembly.diagnostics.repairs == ()


# --- payloads the providers refused before (docs/assembler.md, "Validator") ---

SIGNED = (Reasoning(provider="gemini", signature="Z3NpZw=="),)


def test_an_image_only_assistant_message_with_a_signature_is_dropped_not_a_crash() -> None:
    image_only = Message(role="assistant", content=(ImagePart(url="https://x/a.png"),))
    messages = [U(), image_only.model_copy(update={"reasoning": SIGNED}), U("next")]
    assembly = build(messages, format="gemini", slots=NO_SLOTS)
    assert [c["role"] for c in assembly.payload["contents"]] == ["user"]
    [repair] = assembly.diagnostics.repairs[:1]
    assert repair.kind.value == "dropped_empty_assistant_message"
    assert repair.message_index == 1
    assert validate("gemini", assembly.payload) == []


def test_with_repair_off_an_image_only_turn_is_not_sent_and_does_not_crash() -> None:
    image_only = Message(
        role="assistant", content=(ImagePart(url="https://x/a.png"),), reasoning=SIGNED
    )
    assembly = build([U(), image_only, U("next")], format="gemini", slots=NO_SLOTS, repair=False)
    assert "thoughtSignature" not in json.dumps(assembly.payload)
    assert [c["role"] for c in assembly.payload["contents"]] == ["user"]


def test_a_result_that_is_not_strict_json_goes_as_text() -> None:
    for text in ('{"x": NaN}', '{"y": 1e999}', '{"z": -Infinity}'):
        payload = build([U(), AC(1), T(1, text)], format="gemini", slots=NO_SLOTS).payload
        response = payload["contents"][2]["parts"][0]["functionResponse"]["response"]
        assert response == {"output": text}
        json.dumps(payload, allow_nan=False)


def test_tool_ids_are_sent_as_they_are() -> None:
    call = ToolCall(id="functions.ls:0", name="ls")
    messages = [
        U(),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", tool_call_id="functions.ls:0", content="r"),
    ]
    payload = build(messages, format="gemini", slots=NO_SLOTS).payload
    assert payload["contents"][1]["parts"][0]["functionCall"]["id"] == "functions.ls:0"
