"""Rules of the XML tool protocol payload: OpenAI Chat shape (O1, O4), plus
X1 no native tool data (no tool role, no tool_calls) and X2 user and
assistant messages alternate (never two user messages in a row), X3
`messages` is not empty."""

from __future__ import annotations

from typing import Any

from store.assembler.rules.violation import Violation, Violations


def check(payload: dict[str, Any]) -> list[Violation]:
    messages: list[dict[str, Any]] = payload.get("messages") or []
    found = Violations()
    if not messages:
        found.flag("X3", "messages", "messages must not be empty")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role")
        if role not in {"system", "user", "assistant"}:
            found.flag("O1", where, f"role {role!r} not allowed")
        if role == "tool" or "tool_calls" in message or "tool_call_id" in message:
            found.flag("X1", where, "native tool data in xml-tools")
        if message.get("content") is None:
            found.flag("O4", where, "null content")
        if i and role in {"user", "assistant"} and messages[i - 1].get("role") == role:
            found.flag("X2", where, f"two {role} messages in a row")
    return found
