"""OpenAI Responses rendering."""

from __future__ import annotations

from store.context import ContextSlots
from store.messages import ImagePart, Message, Reasoning, TextPart
from tests.unit.assembler.builders import A, T, U, build

NO_SLOTS = ContextSlots()


def test_instructions_carry_the_system_prompt() -> None:
    payload = build([U()], format="openai-responses", slots=NO_SLOTS).payload
    assert payload["instructions"] == "You are helpful."
    assert payload["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    ]


def test_assistant_text_stays_a_message_item_before_its_function_calls() -> None:
    payload = build(
        [U(), A("checking", 1, 2), T(1), T(2)], format="openai-responses", slots=NO_SLOTS
    ).payload
    assert [item["type"] for item in payload["input"]] == [
        "message", "message", "function_call", "function_call",
        "function_call_output", "function_call_output",
    ]  # fmt: skip
    assert payload["input"][1]["content"] == [
        {"type": "output_text", "text": "checking", "annotations": []}
    ]
    assert payload["input"][2] == {
        "type": "function_call",
        "call_id": "c1",
        "name": "tool1",
        "arguments": '{"n": 1}',
    }
    assert payload["input"][4] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "result 1",
    }


def test_reasoning_is_replayed_immediately_before_its_item() -> None:
    reasoning = (Reasoning(provider="openai", item_id="rs_1", text="plan", data="ENC"),)
    assistant = A("", 1, reasoning=reasoning)
    payload = build([U(), assistant, T(1)], format="openai-responses", slots=NO_SLOTS).payload
    assert payload["input"][1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "ENC",
    }
    assert payload["input"][2]["type"] == "function_call"


def test_other_providers_reasoning_is_not_replayed() -> None:
    reasoning = (Reasoning(provider="anthropic", text="t", signature="s"),)
    payload = build(
        [U(), A("x", reasoning=reasoning)], format="openai-responses", slots=NO_SLOTS
    ).payload
    assert [item["type"] for item in payload["input"]] == ["message", "message"]


def test_images_become_input_image_parts() -> None:
    message = Message(role="user", content=(TextPart(text="see"), ImagePart(url="https://x/a.png")))
    payload = build([message], format="openai-responses", slots=NO_SLOTS).payload
    assert payload["input"][0]["content"][1] == {
        "type": "input_image",
        "image_url": "https://x/a.png",
        "detail": "auto",
    }
