"""Anthropic Messages rendering, alternation repairs and cache breakpoints."""

from __future__ import annotations

import hashlib
import re

from store.assembler import RepairKind, validate
from store.assembler.formats.anthropic import _cacheable
from store.assembler.tool_ids import ANTHROPIC
from store.domain.context import AgentProfile, ContextSlots
from store.domain.messages import ImagePart, Message, Reasoning, TextPart, ToolCall
from tests.unit.assembler.builders import AC, A, T, U, build

NO_SLOTS = ContextSlots()


def test_system_is_a_top_level_list_of_text_blocks_with_a_breakpoint() -> None:
    payload = build([U()], format="anthropic", slots=NO_SLOTS).payload
    assert payload["system"] == [
        {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}
    ]


def test_all_results_of_a_block_go_in_one_user_message_results_first() -> None:
    payload = build(
        [U(), AC(1, 2), T(2), T(1), U("next")], format="anthropic", slots=NO_SLOTS
    ).payload
    results = payload["messages"][2]
    assert results["role"] == "user"
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result", "text"]
    assert [b.get("tool_use_id") for b in results["content"][:2]] == ["c2", "c1"]


def test_an_error_result_is_flagged_and_an_empty_result_has_no_content() -> None:
    payload = build(
        [U(), AC(1, 2), T(1, "boom", is_error=True), T(2, "")], format="anthropic"
    ).payload
    first, second = payload["messages"][2]["content"][:2]
    assert first == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "boom",
        "is_error": True,
    }
    assert "content" not in second


def test_a_history_starting_with_the_assistant_gets_a_minimal_user_turn() -> None:
    assembly = build([A("hi"), U()], format="anthropic", slots=NO_SLOTS)
    assert assembly.payload["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": "(conversation continues)"}],
    }
    assert "inserted_user_turn" in [r.kind.value for r in assembly.diagnostics.repairs]


def test_consecutive_user_messages_merge_and_are_listed() -> None:
    assembly = build([U("a"), U("b")], format="anthropic", slots=NO_SLOTS)
    assert len(assembly.payload["messages"]) == 1
    assert [r.kind.value for r in assembly.diagnostics.repairs] == ["merged_for_alternation"]


def test_results_and_the_user_words_after_them_share_a_turn_without_a_repair() -> None:
    # The provider's own shape (A5), not a change to the history.
    assembly = build(
        [U(), AC(1, 2), T(1), T(2), U("next"), A("done")], format="anthropic", slots=NO_SLOTS
    )
    turn = assembly.payload["messages"][2]
    assert [b["type"] for b in turn["content"]] == ["tool_result", "tool_result", "text"]
    assert assembly.diagnostics.repairs == ()


def test_a_second_user_message_after_results_is_a_listed_merge() -> None:
    assembly = build([U(), AC(1), T(1), U("one"), U("two")], format="anthropic", slots=NO_SLOTS)
    merges = [r for r in assembly.diagnostics.repairs if r.kind.value == "merged_for_alternation"]
    assert [(r.payload_index, r.detail) for r in merges] == [
        (2, "2 consecutive user messages merged into one turn")
    ]


def test_thinking_blocks_come_first_and_redacted_thinking_is_kept() -> None:
    reasoning = (
        Reasoning(provider="anthropic", text="hmm", signature="sig"),
        Reasoning(provider="anthropic", data="opaque", redacted=True),
    )
    payload = build([U(), A("answer", 1, reasoning=reasoning), T(1)], format="anthropic").payload
    assert payload["messages"][1]["content"][:3] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "answer"},
    ]


def test_merged_assistant_turns_hoist_thinking_first() -> None:
    reasoning = (Reasoning(provider="anthropic", text="hmm", signature="sig"),)
    assembly = build(
        [U(), A("one"), A("two", reasoning=reasoning)], format="anthropic", slots=NO_SLOTS
    )
    assert [b["type"] for b in assembly.payload["messages"][1]["content"]] == [
        "thinking",
        "text",
        "text",
    ]
    assert "hoisted_thinking" in [r.kind.value for r in assembly.diagnostics.repairs]


def test_final_assistant_trailing_whitespace_is_stripped() -> None:
    assembly = build([U(), A("done  \n")], format="anthropic", slots=NO_SLOTS)
    assert assembly.payload["messages"][-1]["content"][-1]["text"] == "done"
    assert "stripped_trailing_whitespace" in [r.kind.value for r in assembly.diagnostics.repairs]


def test_breakpoint_on_the_last_block_before_the_special_block() -> None:
    messages = [U(), AC(1), T(1), AC(2), T(2), AC(3), T(3), AC(4), T(4)]
    assembly = build(messages, format="anthropic")
    # SP goes after T2 and merges into T2's user turn (messages[4]) after its tool_result.
    turn = assembly.payload["messages"][4]["content"]
    assert turn[0]["type"] == "tool_result"
    assert turn[0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in turn[1]
    assert assembly.diagnostics.cache_breakpoints == ("system[0]", "messages[4].content[0]")


def test_without_a_special_block_the_breakpoint_is_on_the_last_block() -> None:
    assembly = build([U(), A("x")], format="anthropic", slots=NO_SLOTS)
    assert assembly.diagnostics.cache_breakpoints == ("system[0]", "messages[1].content[0]")


def test_breakpoints_can_be_turned_off() -> None:
    assembly = build([U()], format="anthropic", cache_breakpoints=False)
    assert assembly.diagnostics.cache_breakpoints == ()
    assert "cache_control" not in assembly.payload["system"][0]


def test_no_system_key_without_a_system_prompt() -> None:
    payload = build([U()], format="anthropic", profile=AgentProfile(), slots=NO_SLOTS).payload
    assert "system" not in payload


def test_images_use_base64_or_url_sources() -> None:
    content = (
        ImagePart(url="https://x/a.png"),
        ImagePart(data="aGk=", media_type="image/png"),
        TextPart(text="?"),
    )
    payload = build(
        [Message(role="user", content=content)], format="anthropic", slots=NO_SLOTS
    ).payload
    assert payload["messages"][0]["content"][:2] == [
        {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}},
    ]


def test_repair_indexes_follow_the_inserted_user_turn() -> None:
    reasoning = (Reasoning(provider="anthropic", text="hmm", signature="sig"),)
    assembly = build([A("one"), A("two", reasoning=reasoning)], format="anthropic", slots=NO_SLOTS)
    found = {r.kind.value: r.payload_index for r in assembly.diagnostics.repairs}
    assert found == {"inserted_user_turn": 0, "merged_for_alternation": 1, "hoisted_thinking": 1}


# --- payloads the providers refused before (docs/assembler.md, "Validator") ---


def _kimi_round(call_id: str = "functions.ls:0") -> list[Message]:
    call = ToolCall(id=call_id, name="ls", arguments={"path": "."})
    return [
        U(),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", tool_call_id=call_id, content="a.txt"),
    ]


def test_tool_ids_outside_the_pattern_are_renamed_consistently_and_listed() -> None:
    assembly = build(_kimi_round(), format="anthropic", slots=NO_SLOTS)
    messages = assembly.payload["messages"]
    use_id = messages[1]["content"][0]["id"]
    assert re.fullmatch(r"functions_ls_0_[0-9a-f]{8}", use_id)
    assert messages[2]["content"][0]["tool_use_id"] == use_id
    renamed = [r for r in assembly.diagnostics.repairs if r.kind is RepairKind.RENAMED_TOOL_ID]
    assert len(renamed) == 1
    assert "'functions.ls:0'" in renamed[0].detail
    assert use_id in renamed[0].detail
    assert validate("anthropic", assembly.payload) == []
    again = build(_kimi_round(), format="anthropic", slots=NO_SLOTS)
    assert again.payload == assembly.payload  # the same name at every build


def test_a_renamed_id_never_takes_an_id_already_in_the_payload() -> None:
    digest = hashlib.sha256(b"functions.ls:0").hexdigest()
    taken = f"functions_ls_0_{digest[:8]}"
    assert ANTHROPIC.rename("functions.ls:0", {taken}) == f"functions_ls_0_{digest[:12]}"
    messages = [*_kimi_round(taken), *_kimi_round()[1:]]
    assembly = build(messages, format="anthropic", slots=NO_SLOTS)
    ids = [
        b["id"]
        for m in assembly.payload["messages"]
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    assert ids == [taken, f"functions_ls_0_{digest[:12]}"]
    assert validate("anthropic", assembly.payload) == []


def test_a_blank_result_is_sent_without_content_and_listed() -> None:
    assembly = build(
        [U(), AC(1), T(1, " \n ")], format="anthropic", slots=NO_SLOTS, cache_breakpoints=False
    )
    result = assembly.payload["messages"][2]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "c1"}
    [repair] = assembly.diagnostics.repairs
    assert (repair.kind, repair.payload_index) == (RepairKind.DROPPED_EMPTY_TEXT, 2)


def test_the_breakpoint_is_never_on_a_thinking_block() -> None:
    thinking = (Reasoning(provider="anthropic", text="hmm", signature="sig"),)
    image_only = Message(
        role="assistant", content=(ImagePart(url="https://x/a.png"),), reasoning=thinking
    )
    # repair off: the image-only message stays, and renders nothing (thinking
    # alone is not sent), so the breakpoint goes on the block before it.
    assembly = build([U("look"), image_only], format="anthropic", repair=False)
    assert assembly.payload["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "## Useful Information\n\nfacts"},
            ],
        }
    ]
    assert validate("anthropic", assembly.payload) == []


def test_cacheable_walks_back_past_thinking_blocks() -> None:
    turns = [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": "d"},
                {"type": "thinking", "thinking": "t", "signature": "s"},
            ],
        },
    ]
    assert _cacheable(turns, (1, 1)) == (0, 0)
    assert _cacheable(turns[1:], (0, 1)) is None


def test_a_reused_call_id_is_renamed_with_its_results() -> None:
    messages = [U(), AC(1), T(1), U("again"), AC(1), T(1, "second")]
    assembly = build(messages, format="anthropic", slots=NO_SLOTS)
    payload = assembly.payload["messages"]
    assert payload[1]["content"][0]["id"] == "c1"
    assert payload[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "result 1",
    }
    assert payload[3]["content"][0]["id"] == "c1_2"
    assert payload[4]["content"][0]["tool_use_id"] == "c1_2"
    kinds = [r.kind for r in assembly.diagnostics.repairs]
    assert kinds.count(RepairKind.RENAMED_DUPLICATE_TOOL_ID) == 1
    assert validate("anthropic", assembly.payload) == []
