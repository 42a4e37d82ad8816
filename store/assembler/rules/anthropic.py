"""Anthropic Messages rules A1-A5 and A7-A9 (A6, the tools list, is not part
of the assembled payload; A10's 100k messages is out of reach here), and:

- A7 also covers a `tool_result` whose content is only whitespace;
- A11 `messages` is not empty;
- A12 `tool_use.id` and `tool_result.tool_use_id` match `^[a-zA-Z0-9_-]+$`
  ("String should match pattern");
- A13 `tool_use` ids are unique in the request;
- A14 no `cache_control` on a `thinking` / `redacted_thinking` block.
"""

from __future__ import annotations

import re
from typing import Any

from store.assembler.rules.violation import Violation, Violations

_THINKING = {"thinking", "redacted_thinking"}
_TTLS = {"5m", "1h"}
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")


def _blank_result(block: dict[str, Any]) -> bool:
    content = block.get("content")
    if isinstance(content, str):
        return bool(content) and not content.strip()
    return False  # text blocks inside are checked as text blocks


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _ids(blocks: list[dict[str, Any]], kind: str, key: str) -> list[str]:
    return [str(b.get(key)) for b in blocks if b.get("type") == kind]


def _check_cache_control(payload: dict[str, Any], found: Violations) -> None:
    marks: list[tuple[str, dict[str, Any]]] = []
    system = payload.get("system")
    if isinstance(system, list):
        marks += [
            (f"system[{k}]", b["cache_control"])
            for k, b in enumerate(system)
            if "cache_control" in b
        ]
    for i, message in enumerate(payload.get("messages") or []):
        for k, block in enumerate(_blocks(message)):
            if "cache_control" in block:
                where = f"messages[{i}].content[{k}]"
                marks.append((where, block["cache_control"]))
                if block.get("type") in _THINKING:
                    found.flag("A14", where, f"cache_control on a {block.get('type')} block")
    if len(marks) > 4:
        found.flag("A8", marks[4][0], f"{len(marks)} cache_control marks (max 4)")
    for where, mark in marks:
        if "ttl" in mark and mark["ttl"] not in _TTLS:
            found.flag("A8", where, f"ttl {mark['ttl']!r} not 5m|1h")


def check(payload: dict[str, Any]) -> list[Violation]:
    messages: list[dict[str, Any]] = payload.get("messages") or []
    found = Violations()
    if not messages:
        found.flag("A11", "messages", "messages must not be empty")
    _check_cache_control(payload, found)
    tool_use_ids: set[str] = set()
    if messages and messages[0].get("role") != "user":
        found.flag("A2", "messages[0]", "first message must be user")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role")
        blocks = _blocks(message)
        if role not in {"user", "assistant"}:
            found.flag("A1", where, f"role {role!r} not user|assistant")
        if i and messages[i - 1].get("role") == role:
            found.flag("A3", where, f"two {role} turns in a row")
        for k, block in enumerate(blocks):
            kind = block.get("type")
            at = f"{where}.content[{k}]"
            if kind == "text" and not str(block.get("text", "")).strip():
                found.flag("A7", at, "empty text block")
            elif kind == "tool_result":
                if _blank_result(block):
                    found.flag("A7", at, "tool_result content is blank")
                inside = block.get("content")
                for inner, part in enumerate(inside if isinstance(inside, list) else []):
                    if part.get("type") == "text" and not str(part.get("text", "")).strip():
                        found.flag("A7", f"{at}.content[{inner}]", "empty text block")
            if kind in {"tool_use", "tool_result"}:
                key = "id" if kind == "tool_use" else "tool_use_id"
                value = block.get(key)
                if not isinstance(value, str) or not _TOOL_ID.fullmatch(value):
                    found.flag("A12", f"{at}.{key}", f"{value!r} does not match ^[a-zA-Z0-9_-]+$")
            if kind == "tool_use":
                use_id = str(block.get("id"))
                if use_id in tool_use_ids:
                    found.flag("A13", at, f"tool_use id {use_id} used twice")
                tool_use_ids.add(use_id)
        kinds = [b.get("type") for b in blocks]
        if role == "assistant":
            first_other = next((k for k, t in enumerate(kinds) if t not in _THINKING), len(kinds))
            if any(t in _THINKING for t in kinds[first_other:]):
                found.flag("A9", where, "thinking blocks must come first")
        if role == "user":
            first_other = next((k for k, t in enumerate(kinds) if t != "tool_result"), len(kinds))
            if "tool_result" in kinds[first_other:]:
                found.flag("A5", where, "tool_result blocks must come first")
        uses = _ids(blocks, "tool_use", "id") if role == "assistant" else []
        following = _blocks(messages[i + 1]) if i + 1 < len(messages) else []
        answers = _ids(following, "tool_result", "tool_use_id")
        if uses and sorted(uses) != sorted(answers):
            found.flag(
                "A4",
                where,
                "tool_use ids were found without tool_result blocks immediately "
                f"after: {', '.join(sorted(set(uses) - set(answers)) or ['(mismatch)'])}",
            )
        results = _ids(blocks, "tool_result", "tool_use_id") if role == "user" else []
        previous = _blocks(messages[i - 1]) if i else []
        if results and not set(results) <= set(_ids(previous, "tool_use", "id")):
            found.flag("A4", where, "tool_result without a tool_use just before")
    if messages and messages[-1].get("role") == "assistant":
        last = _blocks(messages[-1])
        if last and last[-1].get("type") == "text":
            text = str(last[-1].get("text", ""))
            if text != text.rstrip():
                found.flag(
                    "A7",
                    f"messages[{len(messages) - 1}]",
                    "final assistant content ends with whitespace",
                )
    return found
