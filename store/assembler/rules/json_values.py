"""J1, every format: the payload is JSON a provider can read: objects with
string keys, arrays, strings, booleans, null and finite numbers (NaN and
±Infinity have no JSON spelling; the SDKs refuse to send them)."""

from __future__ import annotations

import json
import math
from typing import Any

from store.assembler.rules.violation import Violation


def _problem(value: Any, where: str) -> tuple[str, str] | None:
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return path, f"{item} is not a JSON number"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return path, f"key {key!r} is not a string"
                stack.append((child, f"{path}.{key}"))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{path}[{k}]") for k, child in enumerate(item))
        elif not (item is None or isinstance(item, str | int)):
            return path, f"a {type(item).__name__} is not a JSON value"
    return None


def check(payload: dict[str, Any]) -> list[Violation]:
    found = _problem(payload, "payload")
    if found is None:
        return []
    where, message = found
    return [Violation(rule="J1", where=where.removeprefix("payload."), message=message)]


def strict_json_object(text: Any) -> str | None:
    """Why `text` is not a JSON object in strict JSON (as a tool call's
    `arguments` must be), or None."""
    if not isinstance(text, str):
        return f"arguments must be a JSON string, not {type(text).__name__}"

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            raise ValueError(f"{number} is out of range")
        return value

    try:
        parsed = json.loads(text, parse_constant=refuse, parse_float=finite)
    except ValueError as error:
        return f"arguments are not strict JSON ({error})"
    if not isinstance(parsed, dict):
        return "arguments must be a JSON object"
    return None


def id_problem(value: Any, *, name: str, longest: int) -> str | None:
    """Why `value` cannot be the id the provider calls `name` (a non-empty
    string of at most `longest` characters), or None."""
    if not isinstance(value, str) or not value:
        return f"{name} {value!r} must be a non-empty string"
    if len(value) > longest:
        return f"{name} is {len(value)} characters (max {longest})"
    return None
