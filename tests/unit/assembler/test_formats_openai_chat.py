"""OpenAI Chat Completions rendering."""

from __future__ import annotations

import json

from store.context import ContextSlots
from store.messages import ImagePart, Message, TextPart, ToolCall
from tests.unit.assembler.builders import AC, A, T, U, build

NO_SLOTS = ContextSlots()


def test_tool_call_arguments_are_json_strings_and_content_null_with_calls() -> None:
    call = ToolCall(id="c1", name="read", arguments={"path": "a.py", "lines": [1, 2]})
    messages = [U(), Message(role="assistant", content="", tool_calls=(call,)), T(1)]
    rendered = build(messages, slots=NO_SLOTS).payload["messages"]
    assistant = rendered[2]
    assert assistant["content"] is None
    [tool_call] = assistant["tool_calls"]
    assert tool_call["type"] == "function"
    assert json.loads(tool_call["function"]["arguments"]) == call.arguments
    assert rendered[3] == {"role": "tool", "tool_call_id": "c1", "content": "result 1"}


def test_assistant_text_with_calls_keeps_its_text() -> None:
    rendered = build([U(), A("checking", 1), T(1)], slots=NO_SLOTS).payload["messages"]
    assert rendered[2]["content"] == "checking"


def test_images_become_image_url_parts() -> None:
    content = (
        TextPart(text="see"),
        ImagePart(url="https://x/a.png"),
        ImagePart(data="aGk=", media_type="image/png"),
    )
    rendered = build([Message(role="user", content=content)], slots=NO_SLOTS).payload["messages"]
    assert rendered[1]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
    ]


def test_no_cache_breakpoints_for_openai() -> None:
    assembly = build([U(), AC(1), T(1)])
    assert assembly.diagnostics.cache_breakpoints == ()
