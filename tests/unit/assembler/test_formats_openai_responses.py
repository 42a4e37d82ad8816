"""OpenAI Responses rendering."""

from __future__ import annotations

import hashlib
import re

import pytest

from store.assembler import EmptyWindow, RepairKind, validate
from store.domain.context import ContextSlots
from store.domain.messages import ImagePart, Message, Reasoning, TextPart, ToolCall
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


# --- payloads the providers refused before (docs/assembler.md, "Validator") ---


def test_assistant_text_items_are_output_messages_with_an_id_and_a_status() -> None:
    payload = build([U(), A("checking")], format="openai-responses", slots=NO_SLOTS).payload
    item = payload["input"][1]
    digest = hashlib.sha256(b"checking").hexdigest()[:32]
    assert item == {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{digest}",
        "status": "completed",
        "content": [{"type": "output_text", "text": "checking", "annotations": []}],
    }


def test_message_ids_are_unique_in_a_payload_and_the_same_at_every_build() -> None:
    messages = [U(), A("same"), U("again"), A("same")]
    first = build(messages, format="openai-responses", slots=NO_SLOTS).payload
    ids = [item["id"] for item in first["input"] if item["role"] == "assistant"]
    assert len(set(ids)) == 2
    assert all(re.fullmatch(r"msg_[0-9a-f]{32}", item_id) for item_id in ids)
    assert build(messages, format="openai-responses", slots=NO_SLOTS).payload == first


def test_call_ids_over_64_characters_are_renamed_shorter_ones_kept() -> None:
    for call_id, renamed in (("c" * 64, False), ("c" * 65, True)):
        messages = [
            U(),
            Message(role="assistant", tool_calls=(ToolCall(id=call_id, name="ls"),)),
            Message(role="tool", tool_call_id=call_id, content="r"),
        ]
        assembly = build(messages, format="openai-responses", slots=NO_SLOTS)
        call, output = assembly.payload["input"][1:3]
        assert call["call_id"] == output["call_id"]
        assert (call["call_id"] != call_id) is renamed
        assert len(call["call_id"]) <= 64
        assert validate("openai-responses", assembly.payload) == []


def test_a_reasoning_item_is_replayed_once() -> None:
    reasoning = (Reasoning(provider="openai", item_id="rs_1", text="plan", data="ENC"),)
    messages = [U(), A("one", reasoning=reasoning), U("more"), A("two", reasoning=reasoning)]
    assembly = build(messages, format="openai-responses", slots=NO_SLOTS)
    kinds = [item["type"] for item in assembly.payload["input"]]
    assert kinds == ["message", "reasoning", "message", "message", "message"]
    assert [r.kind for r in assembly.diagnostics.repairs] == [
        RepairKind.DROPPED_DUPLICATE_REASONING
    ]
    assert validate("openai-responses", assembly.payload) == []


def test_an_empty_window_is_refused_even_with_instructions() -> None:
    with pytest.raises(EmptyWindow, match="OpenAI Responses refuses a request without input"):
        build([], format="openai-responses", slots=NO_SLOTS)
