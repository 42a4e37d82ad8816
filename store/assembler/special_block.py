"""The special block: context slots rendered fresh into "special user"
messages at every build (behaviours §1-2).

One user message per non-empty slot, in this order: role definition, TODO,
useful info, folder notes, then custom slots sorted by name. Each message is
marked with its slot name in `metadata[SPECIAL_SLOT]` so later steps (merge,
cache breakpoints, diagnostics) can recognise it.
"""

from __future__ import annotations

from store.assembler.slot_items import render_folder_notes, render_useful_info
from store.domain.context import (
    FOLDER_NOTES,
    ROLE_DEFINITION,
    TODO,
    USEFUL_INFO,
    ContextSlots,
    TodoItem,
)
from store.domain.messages import MAIN_AGENT, Message, MessageKind

SPECIAL_SLOT = "special_slot"

TODO_HEADING = "## Current TODO List"
TODO_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
# A sub-agent sees the conversation's TODO list as context for its task,
# not as its own list to work through and tick off (the source CLI formats
# it "for a sub-agent": `formatTodoContext(todos, true)`).
SUB_AGENT_TODO_HEADING = "## Main Agent's TODO List (context)"
SUB_AGENT_TODO_NOTE = (
    "This is the main agent's plan, for context. You are a sub-agent: do only "
    "the task you were given, do not update this list, and report your result "
    "back to the main agent."
)
DEFAULT_USEFUL_INFO_ITEMS = 10
DEFAULT_FOLDER_NOTES_PER_FOLDER = 3


def render_role_definition(role_definition: str) -> str:
    return f"## Agent Role Definition\n\n{role_definition}"


def render_todo(items: tuple[TodoItem, ...], *, sub_agent: bool = False) -> str:
    """The source CLI's layout: a heading, a blank line, then one line per
    item: `[ ] text (ID: 1)`; `[~]` in progress, `[x]` completed. For a
    sub-agent, its own heading and a note of what the list is to it."""
    lines = [f"{TODO_MARKS[item.status]} {item.content} (ID: {item.id})" for item in items]
    if sub_agent:
        return "\n".join([SUB_AGENT_TODO_HEADING, "", SUB_AGENT_TODO_NOTE, "", *lines])
    return "\n".join([TODO_HEADING, "", *lines])


def render_section(heading: str, text: str) -> str:
    return f"## {heading}\n\n{text}"


def special_block(
    role_definition: str | None,
    slots: ContextSlots,
    *,
    agent_id: str = MAIN_AGENT,
    sub_agent: bool = False,
    useful_info_items: int = DEFAULT_USEFUL_INFO_ITEMS,
    folder_notes_per_folder: int = DEFAULT_FOLDER_NOTES_PER_FOLDER,
) -> list[Message]:
    """The special user messages for one build; empty slots are omitted.
    Useful information and folder notes given as items keep the newest
    items and each folder's last notes (`slot_items`)."""
    sections: list[tuple[str, str]] = []
    if role_definition and role_definition.strip():
        sections.append((ROLE_DEFINITION, render_role_definition(role_definition)))
    if slots.todo:
        sections.append((TODO, render_todo(slots.todo, sub_agent=sub_agent)))
    if slots.useful_info and slots.useful_info.strip():
        useful = render_useful_info(slots.useful_info, useful_info_items)
        sections.append((USEFUL_INFO, render_section("Useful Information", useful)))
    if slots.folder_notes and slots.folder_notes.strip():
        notes = render_folder_notes(slots.folder_notes, folder_notes_per_folder)
        sections.append((FOLDER_NOTES, render_section("Folder Notes", notes)))
    for name in sorted(slots.custom):
        text = slots.custom[name]
        if text.strip():
            sections.append((name, render_section(name, text)))
    return [
        Message(
            role="user",
            content=text,
            kind=MessageKind.OUTPUT,
            agent_id=agent_id,
            metadata={SPECIAL_SLOT: slot},
        )
        for slot, text in sections
    ]


def is_special(message: Message) -> bool:
    return SPECIAL_SLOT in message.metadata
