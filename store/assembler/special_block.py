"""The special block: context slots rendered fresh into "special user"
messages at every build (behaviours §1-2).

One user message per non-empty slot, in this order: role definition, TODO,
useful info, folder notes, then custom slots sorted by name. Each message is
marked with its slot name in `metadata[SPECIAL_SLOT]` so later steps (merge,
cache breakpoints, diagnostics) can recognise it.
"""

from __future__ import annotations

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


def render_role_definition(role_definition: str) -> str:
    return f"## Agent Role Definition\n\n{role_definition}"


def render_todo(items: tuple[TodoItem, ...]) -> str:
    """The source CLI's layout: a heading, a blank line, then one line per
    item: `[ ] text (ID: 1)`; `[~]` in progress, `[x]` completed."""
    lines = [f"{TODO_MARKS[item.status]} {item.content} (ID: {item.id})" for item in items]
    return "\n".join([TODO_HEADING, "", *lines])


def render_section(heading: str, text: str) -> str:
    return f"## {heading}\n\n{text}"


def special_block(
    role_definition: str | None, slots: ContextSlots, *, agent_id: str = MAIN_AGENT
) -> list[Message]:
    """The special user messages for one build; empty slots are omitted."""
    sections: list[tuple[str, str]] = []
    if role_definition and role_definition.strip():
        sections.append((ROLE_DEFINITION, render_role_definition(role_definition)))
    if slots.todo:
        sections.append((TODO, render_todo(slots.todo)))
    if slots.useful_info and slots.useful_info.strip():
        sections.append((USEFUL_INFO, render_section("Useful Information", slots.useful_info)))
    if slots.folder_notes and slots.folder_notes.strip():
        sections.append((FOLDER_NOTES, render_section("Folder Notes", slots.folder_notes)))
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
