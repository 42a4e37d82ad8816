"""merge_same_role (behaviours §5)."""

from __future__ import annotations

from store.assembler.merge import merge_same_role
from store.assembler.special_block import special_block
from store.domain.context import ContextSlots
from store.domain.messages import ImagePart, Message, TextPart
from tests.unit.assembler.builders import AC, A, R, T, U, build


def test_adjacent_same_role_text_is_joined_with_a_newline() -> None:
    merged, repairs = merge_same_role([U("a"), U("b"), A("c")])
    assert [m.content for m in merged] == ["a\nb", "c"]
    assert len(repairs) == 1


def test_tool_results_never_merge_and_calls_are_kept() -> None:
    merged, _ = merge_same_role([A("thinking"), AC(1, 2), T(1), T(2)])
    assert [m.role for m in merged] == ["assistant", "tool", "tool"]
    assert merged[0].content == "thinking"
    assert len(merged[0].tool_calls) == 2


def test_a_message_with_calls_never_absorbs_what_follows() -> None:
    merged, _ = merge_same_role([AC(1), A("after")])
    assert len(merged) == 2


def test_parts_are_concatenated_and_empty_text_dropped() -> None:
    image = ImagePart(url="https://x/y.png")
    merged, _ = merge_same_role([U("a"), Message(role="user", content=(image, TextPart(text=" ")))])
    assert merged[0].content == (TextPart(text="a"), image)


def test_the_special_block_is_not_merged_into_its_neighbours() -> None:
    block = special_block("role", ContextSlots(useful_info="i"))
    merged, _ = merge_same_role([U("before"), *block, U("after")])
    assert [m.content for m in merged] == [
        "before",
        "## Agent Role Definition\n\nrole\n## Useful Information\n\ni",
        "after",
    ]


def test_reminders_merge_only_with_reminders() -> None:
    summary = Message(role="system", kind="summary", content="s")
    merged, _ = merge_same_role([R("a"), R("b"), summary])
    assert [m.content for m in merged] == ["a\nb", "s"]


def test_merge_option_keeps_anthropic_alternation() -> None:
    assembly = build([U("a"), U("b"), A("c")], format="anthropic", merge_same_role=True)
    roles = [m["role"] for m in assembly.payload["messages"]]
    assert roles == ["user", "assistant", "user"]
