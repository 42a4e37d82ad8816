"""Gemini generateContent rules G1-G3."""

from __future__ import annotations

from typing import Any

from store.assembler.rules.violation import Violation


def _calls(content: dict[str, Any], key: str) -> list[tuple[str, str]]:
    return [
        (str(part[key].get("id")), str(part[key].get("name")))
        for part in content.get("parts", [])
        if key in part
    ]


def check(payload: dict[str, Any]) -> list[Violation]:
    contents: list[dict[str, Any]] = payload.get("contents", [])
    found: list[Violation] = []
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        role = content.get("role")
        if role not in {"user", "model"}:
            found.append(
                Violation(
                    rule="G1",
                    where=where,
                    message=f"role {role!r}: contents hold user|model; "
                    "system goes in systemInstruction",
                )
            )
        calls = _calls(content, "functionCall")
        if not calls:
            continue
        if role != "model":
            found.append(
                Violation(rule="G1", where=where, message="functionCall outside a model turn")
            )
        if i == 0 or contents[i - 1].get("role") != "user":
            found.append(
                Violation(
                    rule="G2",
                    where=where,
                    message="a functionCall turn must follow a user or functionResponse turn",
                )
            )
        following = contents[i + 1] if i + 1 < len(contents) else {}
        responses = _calls(following, "functionResponse")
        if sorted(calls) != sorted(responses):
            found.append(
                Violation(
                    rule="G3",
                    where=where,
                    message=f"{len(calls)} functionCall part(s) but the next turn answers "
                    f"{len(responses)} with matching ids/names",
                )
            )
    return found
