"""OpenAI Responses rules R1-R3 and R5 (R4, encrypted reasoning for stateless
use, depends on how the caller stores reasoning and is not checked)."""

from __future__ import annotations

from typing import Any

from store.assembler.rules.violation import Violation

_MODEL_ITEMS = {"reasoning", "function_call"}


def _is_model_turn(item: dict[str, Any]) -> bool:
    return item.get("type") == "message" and item.get("role") == "assistant"


def check(payload: dict[str, Any]) -> list[Violation]:
    items: list[dict[str, Any]] = payload.get("input", [])
    found: list[Violation] = []
    instructions = payload.get("instructions")
    if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
        found.append(
            Violation(
                rule="R5", where="instructions", message="instructions must be non-empty text"
            )
        )
    calls: set[str] = set()
    pending: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"input[{i}]"
        kind = item.get("type")
        if kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                found.append(
                    Violation(
                        rule="R1",
                        where=where,
                        message="No tool call found for function call output "
                        f"with call_id {call_id}",
                    )
                )
            pending.pop(call_id, None)
            continue
        if pending and (
            _is_model_turn(item)
            or kind == "reasoning"
            or (kind == "function_call" and items[i - 1].get("type") != "function_call")
        ):
            for call_id, at in sorted(pending.items()):
                found.append(
                    Violation(
                        rule="R2",
                        where=f"input[{at}]",
                        message=f"No tool output found for function call {call_id}",
                    )
                )
            pending = {}
        if kind == "function_call":
            call_id = str(item.get("call_id"))
            calls.add(call_id)
            pending[call_id] = i
        if kind == "reasoning":
            following = items[i + 1] if i + 1 < len(items) else None
            j = i + 1
            while following is not None and following.get("type") == "reasoning":
                j += 1
                following = items[j] if j < len(items) else None
            if following is None or not (
                _is_model_turn(following) or following.get("type") in _MODEL_ITEMS
            ):
                found.append(
                    Violation(
                        rule="R3",
                        where=where,
                        message="a reasoning item must be immediately followed by its item",
                    )
                )
    for call_id, at in sorted(pending.items()):
        found.append(
            Violation(
                rule="R2",
                where=f"input[{at}]",
                message=f"No tool output found for function call {call_id}",
            )
        )
    return found
