"""Images returned by tools (docs/assembler.md, "Images from tools"): in the
result where the format takes them, in a user message right after the
results where it does not, refused over the size limits."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from store.assembler import AssembleOptions, ProviderFormat, RepairKind, validate
from store.assembler.errors import ToolImageTooLarge
from store.domain.context import ContextSlots
from store.domain.messages import ImagePart, Message, TextPart
from tests.unit.assembler.builders import AC, A, T, U, build
from tests.unit.assembler.sdk_types import sdk_problems

NO_SLOTS = ContextSlots()
SHOT = ImagePart(data="iVBORw0KGgo=", media_type="image/png")
PAGE = ImagePart(url="https://example.com/page.png", media_type="image/png")


def screenshot(call: int = 1, *images: ImagePart, text: str = "took a screenshot") -> Message:
    parts = (TextPart(text=text), *(images or (SHOT,)))
    return Message(role="tool", tool_call_id=f"c{call}", content=parts)


def payload(history: list[Message], format: str, **options: Any) -> dict[str, Any]:
    built = build(history, format=format, slots=NO_SLOTS, **options).payload
    assert validate(format, built) == []
    assert sdk_problems(format, built) == []
    return built


def test_anthropic_takes_them_in_the_tool_result() -> None:
    sent = payload([U("look"), AC(1), screenshot(1, SHOT, PAGE), A("I see it")], "anthropic")
    [result] = sent["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert result["content"] == [
        {"type": "text", "text": "took a screenshot"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": SHOT.data},
        },
        {"type": "image", "source": {"type": "url", "url": PAGE.url}},
    ]


def test_responses_takes_them_in_the_function_call_output() -> None:
    sent = payload([U("look"), AC(1), screenshot(1, SHOT, PAGE)], "openai-responses")
    [output] = [i for i in sent["input"] if i["type"] == "function_call_output"]
    assert output["output"] == [
        {"type": "input_text", "text": "took a screenshot"},
        {
            "type": "input_image",
            "image_url": f"data:image/png;base64,{SHOT.data}",
            "detail": "auto",
        },
        {"type": "input_image", "image_url": PAGE.url, "detail": "auto"},
    ]


def test_gemini_takes_them_as_parts_of_the_function_response() -> None:
    sent = payload([U("look"), AC(1), screenshot(1, SHOT, PAGE)], "gemini")
    [part] = sent["contents"][2]["parts"]
    response = part["functionResponse"]
    assert response["response"] == {"output": "took a screenshot"}
    assert response["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": SHOT.data}},
        {"fileData": {"fileUri": PAGE.url, "mimeType": "image/png"}},
    ]


def test_openai_chat_sends_them_in_a_user_message_right_after_the_results() -> None:
    history = [U("look"), AC(1, 2), screenshot(1), T(2), A("done")]
    assembly = build(history, format="openai-chat", slots=NO_SLOTS)
    sent = assembly.payload["messages"]
    assert validate("openai-chat", assembly.payload) == []
    assert sdk_problems("openai-chat", assembly.payload) == []
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    assert sent[3]["content"] == "took a screenshot"
    assert sent[5]["content"] == [
        {"type": "text", "text": "[images returned by tool call c1]"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{SHOT.data}"}},
    ]
    [moved] = [
        r for r in assembly.diagnostics.repairs if r.kind is RepairKind.MOVED_TOOL_RESULT_IMAGES
    ]
    assert moved.payload_index == 5


def test_chat_images_at_the_end_of_the_window_still_follow() -> None:
    sent = payload([U("look"), AC(1), screenshot(1)], "openai-chat")["messages"]
    assert [m["role"] for m in sent][-3:] == ["assistant", "tool", "user"]


def test_reasoning_replay_still_finds_its_message_after_moved_images() -> None:
    thinking = A("", 1, reasoning_content="look first")
    sent = payload(
        [U("look"), thinking, screenshot(1), A("", 2, reasoning_content="then this"), T(2)],
        "openai-chat",
    )["messages"]
    assistants = [m for m in sent if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == ["look first", "then this"]


def test_xml_tools_sends_them_in_a_user_message_after_the_round() -> None:
    sent = payload([U("look"), AC(1), screenshot(1), A("seen")], "xml-tools")["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "took a screenshot" in sent[2]["content"]
    assert sent[3]["content"][0] == {"type": "text", "text": "[images returned by tool call c1]"}


def test_the_stored_result_keeps_its_images_and_nothing_is_listed_as_dropped() -> None:
    assembly = build([U(), AC(1), screenshot(1)], format="anthropic")
    kinds = {r.kind for r in assembly.diagnostics.repairs}
    assert RepairKind.DROPPED_TOOL_RESULT_IMAGE not in kinds


def test_an_image_over_the_limit_is_refused_by_name() -> None:
    big = ImagePart(data="A" * 4_000, media_type="image/png")  # 3,000 bytes
    history = [U(), AC(7), screenshot(7, big)]
    with pytest.raises(ToolImageTooLarge, match=r"tool call 'c7' is 3,000 bytes.*per image"):
        build(history, max_tool_image_bytes=2_000)
    assert build(history, max_tool_image_bytes=3_000).payload


def test_images_over_the_payload_limit_are_refused() -> None:
    image = ImagePart(data="A" * 4_000, media_type="image/png")
    history = [U(), AC(1, 2), screenshot(1, image), screenshot(2, image)]
    with pytest.raises(ToolImageTooLarge, match="max_tool_images_bytes"):
        build(history, max_tool_images_bytes=5_000)


def test_images_of_turns_the_budget_dropped_do_not_count() -> None:
    image = ImagePart(data="A" * 4_000, media_type="image/png")
    history = [U("x" * 4_000), AC(1), screenshot(1, image), U("y" * 4_000), A("z" * 4_000)]
    built = build(history, token_budget=1_500, max_tool_image_bytes=1_000)
    trim = built.diagnostics.dropped_by_budget
    assert trim is not None
    assert trim.dropped_messages >= 3


def test_the_limits_are_ranged_and_typed() -> None:
    with pytest.raises(ValidationError):
        AssembleOptions(max_tool_image_bytes=0)
    with pytest.raises(ValidationError):
        AssembleOptions.model_validate({"max_tool_images_bytes": "big"})
    with pytest.raises(ValidationError):
        AssembleOptions(max_tool_images_bytes=10**12)


@pytest.mark.parametrize("format", list(ProviderFormat))
def test_clipping_keeps_the_images(format: ProviderFormat) -> None:
    long = screenshot(1, SHOT, text="x" * 5_000)
    sent = payload([U("look"), AC(1), long], format.value, max_tool_result_chars=300)
    assert "iVBORw0KGgo=" in str(sent)
    assert "characters cut from this tool result" in str(sent)
