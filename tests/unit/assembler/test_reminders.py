"""Reminder rendering per provider and the inline style (behaviours §6)."""

from __future__ import annotations

from store.assembler.reminders import inline_reminders
from store.domain.context import ContextSlots
from store.domain.messages import ImagePart, Message, TextPart
from tests.unit.assembler.builders import AC, A, R, T, U, build

NO_SLOTS = ContextSlots()
WRAPPED = "<system-reminder>\ntodo changed\n</system-reminder>"


def test_openai_chat_renders_a_system_message_at_its_place() -> None:
    payload = build([U(), R(), A()], slots=NO_SLOTS).payload
    assert payload["messages"][2] == {"role": "system", "content": "todo changed"}


def test_openai_responses_renders_a_developer_item_at_its_place() -> None:
    payload = build([U(), R(), A()], format="openai-responses", slots=NO_SLOTS).payload
    assert payload["input"][1] == {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "todo changed"}],
    }


def test_anthropic_renders_a_reminder_block_merged_into_the_user_turn() -> None:
    payload = build([U(), R(), A()], format="anthropic", slots=NO_SLOTS).payload
    assert payload["messages"][0]["content"] == [
        {"type": "text", "text": "hello"},
        {"type": "text", "text": WRAPPED},
    ]


def test_anthropic_reminder_after_a_block_follows_the_tool_results() -> None:
    payload = build([U(), AC(1), T(1), R(), A()], format="anthropic", slots=NO_SLOTS).payload
    assert [b["type"] for b in payload["messages"][2]["content"]] == ["tool_result", "text"]
    assert payload["messages"][2]["content"][1]["text"] == WRAPPED


def test_gemini_renders_a_reminder_text_part_in_the_user_turn() -> None:
    payload = build([U(), AC(1), R(), T(1)], format="gemini", slots=NO_SLOTS).payload
    parts = payload["contents"][2]["parts"]
    assert "functionResponse" in parts[0]
    assert parts[1] == {"text": WRAPPED}


def test_inline_style_prepends_to_the_last_user_text() -> None:
    assembly = build([U("first"), R(), U("last"), A()], reminder_style="inline", slots=NO_SLOTS)
    assert [m["role"] for m in assembly.payload["messages"]] == [
        "system",
        "user",
        "user",
        "assistant",
    ]
    assert assembly.payload["messages"][2]["content"] == f"{WRAPPED}\nlast"


def test_inline_style_appends_a_text_block_to_list_content() -> None:
    image = ImagePart(url="https://x/y.png")
    last = Message(role="user", content=(TextPart(text="look"), image))
    folded, repairs = inline_reminders([R(), last])
    assert folded == [
        last.model_copy(update={"content": (TextPart(text="look"), image, TextPart(text=WRAPPED))})
    ]
    assert repairs == []


def test_inline_style_without_a_user_message_keeps_reminders_in_place() -> None:
    folded, repairs = inline_reminders([A(), R()])
    assert [m.role for m in folded] == ["assistant", "system"]
    assert [r.kind.value for r in repairs] == ["inline_reminder_fallback"]
