"""JSON helpers shared by the adapters' mappings."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

# (separators, ensure_ascii): the ways a JSON arguments string is commonly written.
STYLES: tuple[tuple[tuple[str, str], bool], ...] = (
    ((",", ":"), False),
    ((", ", ": "), False),
    ((",", ":"), True),
    ((", ", ": "), True),
)


def plain(value: Any) -> Any:
    """`value` as plain JSON data (dicts, lists, str, numbers, bools, None)."""
    return to_jsonable_python(value)


def _jsonb_order(value: Any) -> Any:
    """`value` with object keys in the order PostgreSQL's jsonb returns them
    (shorter keys first, then by bytes), so a dump is the same on both
    backends."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: _jsonb_order(value[k]) for k in keys}
    if isinstance(value, list):
        return [_jsonb_order(v) for v in value]
    return value


def dump(value: Any, style: int) -> str:
    separators, ensure_ascii = STYLES[style]
    return json.dumps(_jsonb_order(value), separators=separators, ensure_ascii=ensure_ascii)


def parse_arguments(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A JSON arguments string as (an object for the store, what to keep so
    the exact string comes back): `{"args": style}` when a dump in that style
    gives it back, else `{"arguments": text}` (and the object if it parses)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}, {"arguments": text}
    if not isinstance(parsed, dict):
        return {}, {"arguments": text}
    for style in range(len(STYLES)):
        if dump(parsed, style) == text:
            return parsed, {"args": style}
    return parsed, {"arguments": text}


def arguments_text(arguments: dict[str, Any], kept: dict[str, Any]) -> str:
    if isinstance(kept.get("arguments"), str):
        return str(kept["arguments"])
    style = kept.get("args", 0)
    return dump(arguments, style if isinstance(style, int) and 0 <= style < len(STYLES) else 0)
