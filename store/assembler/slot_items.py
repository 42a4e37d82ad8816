"""Useful information and folder notes given as items, rendered as the
coding-agent CLI keeps them: the newest useful items, the last notes of
each folder (docs/assembler.md, "Useful information and folder notes").

A slot's value is text. Text that is a JSON array of items is read as
items; any other text is rendered as it is (free text, as before):

    useful_info:  [{"content": "the API key is in .env"}, ...]        oldest first
    folder_notes: [{"folder": "src/api", "note": "routes live here"}, ...]

- useful information: the newest `useful_info_items` items (the end of
  the list), oldest of them first, one `- ` line each;
- folder notes: per folder, its last `folder_notes_per_folder` notes;
  folders by depth (the root's first, then each level down; ties by
  path), each under a `### <folder>` heading.

A value that looks like items but is not (a wrong field, a non-string) is
rendered as free text: a slot never makes a build fail.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from store.domain.inputs import BoundedText


class _Item(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class UsefulInfo(_Item):
    content: BoundedText


class FolderNote(_Item):
    folder: BoundedText
    note: BoundedText


_T = TypeVar("_T", bound=_Item)


def _items(text: str, model: type[_T]) -> list[_T] | None:
    """`text` read as a JSON array of `model` items, or None when it is not one."""
    if not text.lstrip().startswith("["):
        return None
    try:
        raw: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, list) or not raw:
        return None
    try:
        return [model.model_validate(item) for item in raw]
    except ValidationError:
        return None


def render_useful_info(text: str, newest: int) -> str:
    """The useful-information section's body: the newest items, or the text."""
    items = _items(text, UsefulInfo)
    if items is None:
        return text
    return "\n".join(f"- {item.content}" for item in items[-newest:])


def folder_depth(folder: str) -> int:
    """How deep a folder is: the root (`.`, `/`, ``) is 0, `src` 1, `src/api` 2."""
    parts = [p for p in folder.replace("\\", "/").split("/") if p not in {"", "."}]
    return len(parts)


def render_folder_notes(text: str, per_folder: int) -> str:
    """The folder-notes section's body: each folder's last notes, folders
    by depth, or the text."""
    notes = _items(text, FolderNote)
    if notes is None:
        return text
    by_folder: dict[str, list[str]] = {}
    for note in notes:
        by_folder.setdefault(note.folder, []).append(note.note)
    folders = sorted(by_folder, key=lambda f: (folder_depth(f), f))
    return "\n\n".join(_folder(folder, by_folder[folder][-per_folder:]) for folder in folders)


def _folder(folder: str, notes: Sequence[str]) -> str:
    return "\n".join([f"### {folder}", *(f"- {note}" for note in notes)])
