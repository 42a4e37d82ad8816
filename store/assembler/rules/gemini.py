"""Gemini generateContent rules G1-G3, and:

- G7 `contents` is not empty;
- G8 every content has at least one part;
- G9 a `functionResponse` answers a `functionCall` of the model turn just
  before it (an orphan response is refused);
- G11 `inlineData.data` and `thoughtSignature` are base64 (the SDK and the
  API decode them as bytes).
"""

from __future__ import annotations

import base64
import re
from typing import Any

from store.assembler.rules.violation import Violation, Violations

_STANDARD = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_URL_SAFE = re.compile(r"[A-Za-z0-9_-]*={0,2}")


def _base64_problem(value: Any) -> str | None:
    """Why `value` is not canonical base64 (either alphabet, padding optional),
    as Gemini and its SDK decode bytes, or None."""
    if not isinstance(value, str):
        return f"a {type(value).__name__}, not base64 text"
    url_safe = not _STANDARD.fullmatch(value)
    if url_safe and not _URL_SAFE.fullmatch(value):
        return "not base64"
    bare = value.rstrip("=")
    if len(bare) % 4 == 1:
        return "not base64 (impossible length)"
    padded = bare + "=" * (-len(bare) % 4)
    try:
        if url_safe:
            canonical = base64.urlsafe_b64encode(base64.urlsafe_b64decode(padded))
        else:
            canonical = base64.b64encode(base64.b64decode(padded, validate=True))
    except ValueError:
        return "not base64"
    if canonical.decode("ascii") != padded:
        return "not canonical base64 (stray bits in the last character)"
    return None


def _check_parts(content: dict[str, Any], where: str, found: Violations) -> None:
    for k, part in enumerate(content.get("parts") or []):
        if "thoughtSignature" in part and (problem := _base64_problem(part["thoughtSignature"])):
            found.flag("G11", f"{where}.parts[{k}].thoughtSignature", problem)
        inline = part.get("inlineData")
        if isinstance(inline, dict) and (problem := _base64_problem(inline.get("data"))):
            found.flag("G11", f"{where}.parts[{k}].inlineData.data", problem)


def _calls(content: dict[str, Any], key: str) -> list[tuple[str, str]]:
    return [
        (str(part[key].get("id")), str(part[key].get("name")))
        for part in content.get("parts", [])
        if key in part
    ]


def check(payload: dict[str, Any]) -> list[Violation]:
    contents: list[dict[str, Any]] = payload.get("contents") or []
    found = Violations()
    if not contents:
        found.flag("G7", "contents", "contents must not be empty")
    system = payload.get("systemInstruction")
    if isinstance(system, dict):
        _check_parts(system, "systemInstruction", found)
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        role = content.get("role")
        if not content.get("parts"):
            found.flag("G8", where, "parts must not be empty")
        _check_parts(content, where, found)
        responses = _calls(content, "functionResponse")
        previous = contents[i - 1] if i else {}
        if responses and not (previous.get("role") == "model" and _calls(previous, "functionCall")):
            found.flag(
                "G9", where, "functionResponse without a functionCall in the model turn before"
            )
        if role not in {"user", "model"}:
            found.flag(
                "G1",
                where,
                f"role {role!r}: contents hold user|model; system goes in systemInstruction",
            )
        calls = _calls(content, "functionCall")
        if not calls:
            continue
        if role != "model":
            found.flag("G1", where, "functionCall outside a model turn")
        if i == 0 or contents[i - 1].get("role") != "user":
            found.flag(
                "G2", where, "a functionCall turn must follow a user or functionResponse turn"
            )
        following = contents[i + 1] if i + 1 < len(contents) else {}
        responses = _calls(following, "functionResponse")
        if sorted(calls) != sorted(responses):
            found.flag(
                "G3",
                where,
                f"{len(calls)} functionCall part(s) but the next turn answers "
                f"{len(responses)} with matching ids/names",
            )
    return found
