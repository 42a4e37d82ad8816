"""The special block: order, formats, empty slots omitted (behaviours §1-2)."""

from __future__ import annotations

from store.assembler import render_todo, special_block
from store.assembler.special_block import is_special
from store.domain.context import ContextSlots, TodoItem
from tests.unit.assembler.builders import FOUR_SLOTS


def test_order_is_role_todo_useful_info_folder_notes_then_custom_sorted() -> None:
    slots = FOUR_SLOTS.model_copy(update={"custom": {"zeta": "z", "alpha": "a"}})
    block = special_block("You review code.", slots)
    assert [m.metadata["special_slot"] for m in block] == [
        "role_definition", "todo", "useful_info", "folder_notes", "alpha", "zeta",
    ]  # fmt: skip
    assert all(m.role == "user" and is_special(m) for m in block)


def test_role_definition_uses_the_seed_heading() -> None:
    [message] = special_block("You review code.", ContextSlots())
    assert message.content == "## Agent Role Definition\n\nYou review code."


def test_todo_format_heading_marks_and_ids() -> None:
    items = (
        TodoItem(id="1", content="read the spec", status="completed"),
        TodoItem(id="2", content="write the code", status="in_progress"),
        TodoItem(id="3", content="ship it", status="pending"),
    )
    assert render_todo(items) == (
        "## Current TODO List\n"
        "\n"
        "[x] read the spec (ID: 1)\n"
        "[~] write the code (ID: 2)\n"
        "[ ] ship it (ID: 3)"
    )


def test_sections_for_useful_info_folder_notes_and_custom() -> None:
    slots = ContextSlots(useful_info="u", folder_notes="f", custom={"plan": "p"})
    assert [m.content for m in special_block(None, slots)] == [
        "## Useful Information\n\nu",
        "## Folder Notes\n\nf",
        "## plan\n\np",
    ]


def test_empty_slots_are_omitted() -> None:
    slots = ContextSlots(useful_info="  ", folder_notes="", custom={"x": " "})
    assert special_block("  ", slots) == []
    assert special_block(None, ContextSlots()) == []


def test_block_messages_belong_to_the_agent() -> None:
    [message] = special_block("r", ContextSlots(), agent_id="sub-1")
    assert message.agent_id == "sub-1"
