"""Repairs of the visible window (behaviours §3, §6)."""

from __future__ import annotations

from store.assembler import Repair, RepairKind
from store.assembler.repair import INTERRUPTED_RESULT, normalise_window
from store.domain.messages import ImagePart, Message, TextPart
from tests.unit.assembler.builders import AC, R, T, U, build, shape


def kinds(assembly_repairs: tuple[Repair, ...]) -> list[str]:
    return [r.kind.value for r in assembly_repairs]


def test_a_call_without_result_gets_an_interrupted_placeholder() -> None:
    assembly = build([U(), AC(1, 2), T(1)])
    assert shape(assembly)[-2:] == ["T1", "T2"]
    placeholder = assembly.messages[-1]
    assert placeholder.text == INTERRUPTED_RESULT
    assert placeholder.is_error
    assert "synthesized_tool_result" in kinds(assembly.diagnostics.repairs)


def test_a_result_without_call_is_dropped() -> None:
    assembly = build([U(), T(9)])
    assert "T9" not in shape(assembly)
    [repair] = assembly.diagnostics.repairs
    assert repair.kind is RepairKind.DROPPED_ORPHAN_TOOL_RESULT
    assert repair.message_index == 1


def test_a_second_result_for_one_call_is_dropped() -> None:
    assembly = build([U(), AC(1), T(1), T(1, "again")])
    assert shape(assembly).count("T1") == 1
    assert kinds(assembly.diagnostics.repairs) == ["dropped_duplicate_tool_result"]


def test_a_reminder_between_call_and_result_goes_after_the_block() -> None:
    assembly = build([U(), AC(1, 2), T(1), R(), T(2)], policy="tail")
    assert shape(assembly) == ["S", "U", "A[1,2]", "T1", "T2", "R", "SP"]
    assert kinds(assembly.diagnostics.repairs) == ["moved_out_of_tool_block"]


def test_a_late_result_is_pulled_up_to_its_call() -> None:
    assembly = build([U(), AC(1), U("meanwhile"), T(1)], policy="tail")
    assert shape(assembly) == ["S", "U", "A[1]", "T1", "U", "SP"]


def test_empty_text_parts_are_dropped() -> None:
    message = Message(role="user", content=(TextPart(text="hi"), TextPart(text="  ")))
    [fixed], repairs = normalise_window([message], repair=True)
    assert fixed.content == (TextPart(text="hi"),)
    assert [r.kind for r in repairs] == [RepairKind.DROPPED_EMPTY_TEXT]


def test_tool_result_images_are_kept_for_the_formats_and_blank_text_dropped() -> None:
    image = ImagePart(url="https://x/y.png")
    result = Message(
        role="tool", tool_call_id="c1", content=(TextPart(text="see"), TextPart(text=" "), image)
    )
    fixed, repairs = normalise_window([AC(1), result], repair=True)
    assert fixed[1].content == (TextPart(text="see"), image)
    assert repairs == []


def test_a_result_of_text_parts_is_joined_into_one_text() -> None:
    result = Message(
        role="tool", tool_call_id="c1", content=(TextPart(text="a"), TextPart(text="b"))
    )
    fixed, _ = normalise_window([AC(1), result], repair=True)
    assert fixed[1].content == "a\nb"


def test_with_repair_off_nothing_is_synthesized_or_dropped() -> None:
    fixed, repairs = normalise_window([AC(1), T(7)], repair=False)
    assert [m.role for m in fixed] == ["assistant", "tool"]
    assert repairs == []


def test_block_contiguity_is_restored_even_with_repair_off() -> None:
    fixed, _ = normalise_window([AC(1), R(), T(1)], repair=False)
    assert [m.role for m in fixed] == ["assistant", "tool", "system"]
