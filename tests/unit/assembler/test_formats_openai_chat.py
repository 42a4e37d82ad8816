"""OpenAI Chat Completions rendering."""

from __future__ import annotations

import json

from store.assembler import RepairKind, validate
from store.domain.context import ContextSlots
from store.domain.inputs import STORED
from store.domain.messages import ImagePart, Message, TextPart, ToolCall
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


# --- payloads the providers refused before (docs/assembler.md, "Validator") ---


def _round(call_id: str) -> list[Message]:
    return [
        U(),
        Message(role="assistant", tool_calls=(ToolCall(id=call_id, name="ls"),)),
        Message(role="tool", tool_call_id=call_id, content="r"),
    ]


def test_ids_up_to_40_characters_are_kept_whatever_their_characters() -> None:
    for call_id in ("functions.ls:0", "call 1|é", "c" * 40):
        assembly = build(_round(call_id), slots=ContextSlots())
        assert assembly.payload["messages"][2]["tool_calls"][0]["id"] == call_id
        assert assembly.payload["messages"][3]["tool_call_id"] == call_id
        assert not [r for r in assembly.diagnostics.repairs if r.kind is RepairKind.RENAMED_TOOL_ID]


def test_longer_ids_are_cut_to_40_with_a_digest_and_listed() -> None:
    long = "call_" + "x" * 60
    assembly = build(_round(long), slots=ContextSlots())
    new_id = assembly.payload["messages"][2]["tool_calls"][0]["id"]
    assert len(new_id) == 40
    assert new_id.startswith("call_xxx")
    assert assembly.payload["messages"][3]["tool_call_id"] == new_id
    assert [r.kind for r in assembly.diagnostics.repairs] == [RepairKind.RENAMED_TOOL_ID]
    assert validate("openai-chat", assembly.payload) == []


def test_non_finite_arguments_go_as_text_and_are_listed() -> None:
    call = ToolCall.model_validate(
        {"id": "c1", "name": "f", "arguments": {"a": float("nan"), "b": [float("-inf")]}},
        context=STORED,
    )
    messages = [U(), Message(role="assistant", tool_calls=(call,)), T(1)]
    assembly = build(messages, slots=ContextSlots())
    arguments = assembly.payload["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"a": "NaN", "b": ["-Infinity"]}
    [repair] = assembly.diagnostics.repairs
    assert repair.kind is RepairKind.REPLACED_NON_FINITE_NUMBER
    assert "/a, /b/0" in repair.detail
    assert validate("openai-chat", assembly.payload) == []


def test_a_window_with_only_a_system_prompt_is_a_system_only_request() -> None:
    assembly = build([], slots=ContextSlots())
    assert assembly.payload == {"messages": [{"role": "system", "content": "You are helpful."}]}
