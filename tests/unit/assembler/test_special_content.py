"""Special user content as the coding-agent CLI shapes it (docs/assembler.md,
"Useful information and folder notes"; docs/behaviours.md §7). Each test
quotes the seed line it implements."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from store.assembler import AssembleOptions
from store.assembler.slot_items import folder_depth
from store.assembler.special_block import SUB_AGENT_TODO_HEADING, TODO_HEADING, special_block
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.messages import MessageKind
from tests.unit.assembler.builders import U, build

TODOS = (TodoItem(id="1", content="write the parser", status="in_progress"),)


def _slot(
    slot: str,
    *,
    slots: ContextSlots,
    sub_agent: bool = False,
    useful_info_items: int = 10,
    folder_notes_per_folder: int = 3,
) -> str:
    block = special_block(
        None,
        slots,
        sub_agent=sub_agent,
        useful_info_items=useful_info_items,
        folder_notes_per_folder=folder_notes_per_folder,
    )
    [message] = [m for m in block if m.metadata["special_slot"] == slot]
    assert isinstance(message.content, str)
    return message.content


def test_a_sub_agent_gets_the_todo_list_worded_for_a_sub_agent() -> None:
    # Seed 000, 阶段3: "const todoContext = formatTodoContext(existingTodoList.todos, true);
    # // isSubAgent=true"
    sub = _slot("todo", slots=ContextSlots(todo=TODOS), sub_agent=True)
    main = _slot("todo", slots=ContextSlots(todo=TODOS))
    assert main.startswith(TODO_HEADING)
    assert sub.startswith(SUB_AGENT_TODO_HEADING)
    assert "You are a sub-agent" in sub
    assert "do not update this list" in sub
    assert sub.endswith("[~] write the parser (ID: 1)")


def test_a_sub_agent_build_uses_the_sub_agent_wording() -> None:
    profile = AgentProfile(agent_id="helper", is_sub_agent=True, role_definition="You test.")
    assembly = build([U("go", agent_id="helper")], profile=profile, slots=ContextSlots(todo=TODOS))
    assert SUB_AGENT_TODO_HEADING in json.dumps(assembly.payload)


def test_useful_information_keeps_the_newest_items() -> None:
    # Seed 000, 阶段2: "const usefulInfoContext = await formatUsefulInfoContext(
    # usefulInfoList.items,);" — a list of items, rendered as the slot's section.
    items = [{"content": f"fact {i}"} for i in range(15)]
    text = _slot("useful_info", slots=ContextSlots(useful_info=json.dumps(items)))
    assert text.splitlines()[0] == "## Useful Information"
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert lines == [f"- fact {i}" for i in range(5, 15)]  # the newest 10, oldest first
    three = _slot(
        "useful_info", slots=ContextSlots(useful_info=json.dumps(items)), useful_info_items=3
    )
    assert [line for line in three.splitlines() if line.startswith("- ")] == [
        "- fact 12",
        "- fact 13",
        "- fact 14",
    ]


def test_folder_notes_keep_the_last_notes_of_each_folder_by_depth() -> None:
    # Seed 000, 阶段3: "const folderNotebookContext = formatFolderNotebookContext();"
    # ("4. 文件夹笔记(新增)": the sub-agent gets the folder notes too).
    notes = [
        {"folder": "src/api/routes", "note": "one route a file"},
        {"folder": "src", "note": "old src note"},
        {"folder": "src", "note": "src note 2"},
        {"folder": "src", "note": "src note 3"},
        {"folder": "src", "note": "src note 4"},
        {"folder": ".", "note": "run make test"},
    ]
    text = _slot("folder_notes", slots=ContextSlots(folder_notes=json.dumps(notes)), sub_agent=True)
    assert text == (
        "## Folder Notes\n\n"
        "### .\n- run make test\n\n"
        "### src\n- src note 2\n- src note 3\n- src note 4\n\n"
        "### src/api/routes\n- one route a file"
    )
    one = _slot(
        "folder_notes",
        slots=ContextSlots(folder_notes=json.dumps(notes)),
        folder_notes_per_folder=1,
    )
    assert "- src note 4" in one
    assert "- src note 3" not in one


@pytest.mark.parametrize(
    "value",
    [
        "plain notes, as before",
        "[not json",
        "[]",
        '[{"folder": "src"}]',
        '[{"content": 5}]',
        '{"content": "x"}',
    ],
)
def test_anything_else_is_free_text_as_before(value: str) -> None:
    for slot in ("useful_info", "folder_notes"):
        slots = ContextSlots.model_validate({slot: value})
        heading = "Useful Information" if slot == "useful_info" else "Folder Notes"
        assert _slot(slot, slots=slots) == f"## {heading}\n\n{value}"


def test_depth() -> None:
    assert [folder_depth(f) for f in ("", ".", "/", "src", "src/api", "./src/", "a\\b")] == [
        0,
        0,
        0,
        1,
        2,
        1,
        2,
    ]


def test_the_counts_are_options_typed_and_ranged() -> None:
    assert AssembleOptions(useful_info_items=2).useful_info_items == 2
    with pytest.raises(ValidationError):
        AssembleOptions(useful_info_items=0)
    with pytest.raises(ValidationError):
        AssembleOptions.model_validate({"folder_notes_per_folder": "3"})
    with pytest.raises(ValidationError):
        AssembleOptions(folder_notes_per_folder=10_000)


def test_the_block_stays_special_user_messages() -> None:
    block = special_block(
        "role", ContextSlots(todo=TODOS, useful_info='[{"content": "x"}]'), sub_agent=True
    )
    assert [m.kind for m in block] == [MessageKind.OUTPUT] * 3
    assert [m.metadata["special_slot"] for m in block] == ["role_definition", "todo", "useful_info"]
