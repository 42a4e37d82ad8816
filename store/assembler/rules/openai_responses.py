"""OpenAI Responses rules R1-R3 and R5 (R4, encrypted reasoning for stateless
use, depends on how the caller stores reasoning and is not checked), and:

- R6 `input` is not empty (OpenAI refuses a request without input, even with
  instructions);
- R7 ids are unique: no two `function_call`s with one `call_id`, no two items
  with one `id` ("Duplicate item found with id");
- R8 one `function_call_output` per call (a second result is refused);
- R9 `function_call.arguments` is a JSON object in strict JSON;
- R10 `call_id`s are 1 to 64 characters;
- R11 an assistant message item with a content list is an output message
  (`ResponseOutputMessageParam`): an `id` beginning with `msg`, a `status`,
  and `output_text` (with `annotations`) or `refusal` parts.
"""

from __future__ import annotations

from typing import Any

from store.assembler.rules.json_values import id_problem, strict_json_object
from store.assembler.rules.violation import Violation, Violations

_MODEL_ITEMS = {"reasoning", "function_call"}
_STATUSES = {"in_progress", "completed", "incomplete"}
MAX_CALL_ID = 64


def _output_message_problem(item: dict[str, Any]) -> str | None:
    content = item.get("content")
    if isinstance(content, str):
        return None  # an easy input message: {"role": "assistant", "content": "..."}
    item_id = item.get("id")
    if not isinstance(item_id, str) or not item_id.startswith("msg"):
        return f"an assistant output message needs an id beginning with 'msg', not {item_id!r}"
    if item.get("status") not in _STATUSES:
        return f"an assistant output message needs a status, not {item.get('status')!r}"
    for part in content or []:
        kind = part.get("type")
        if kind == "output_text" and not isinstance(part.get("annotations"), list):
            return "output_text parts need annotations (a list)"
        if kind not in {"output_text", "refusal"}:
            return f"content part {kind!r} in an assistant output message"
    return None


def _is_model_turn(item: dict[str, Any]) -> bool:
    return item.get("type") == "message" and item.get("role") == "assistant"


def check(payload: dict[str, Any]) -> list[Violation]:
    raw = payload.get("input")
    items: list[dict[str, Any]] = raw if isinstance(raw, list) else []
    found = Violations()
    if not raw:
        found.flag("R6", "input", "input must not be empty")
    instructions = payload.get("instructions")
    if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
        found.flag("R5", "instructions", "instructions must be non-empty text")
    calls: set[str] = set()
    answered: set[str] = set()
    item_ids: set[str] = set()
    pending: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"input[{i}]"
        kind = item.get("type")
        item_id = item.get("id")
        if isinstance(item_id, str):
            if item_id in item_ids:
                found.flag("R7", where, f"Duplicate item found with id {item_id}")
            item_ids.add(item_id)
        if kind in {"function_call", "function_call_output"} and (
            problem := id_problem(item.get("call_id"), name="call_id", longest=MAX_CALL_ID)
        ):
            found.flag("R10", where, problem)
        if _is_model_turn(item) and (problem := _output_message_problem(item)):
            found.flag("R11", where, problem)
        if kind == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id in answered:
                found.flag("R8", where, f"a second function_call_output for call_id {call_id}")
            answered.add(call_id)
            if call_id not in calls:
                found.flag(
                    "R1",
                    where,
                    f"No tool call found for function call output with call_id {call_id}",
                )
            pending.pop(call_id, None)
            continue
        if pending and (
            _is_model_turn(item)
            or kind == "reasoning"
            or (kind == "function_call" and items[i - 1].get("type") != "function_call")
        ):
            for call_id, at in sorted(pending.items()):
                found.flag(
                    "R2", f"input[{at}]", f"No tool output found for function call {call_id}"
                )
            pending = {}
        if kind == "function_call":
            call_id = str(item.get("call_id"))
            if call_id in calls:
                found.flag("R7", where, f"call_id {call_id} is used by an earlier function_call")
            if problem := strict_json_object(item.get("arguments")):
                found.flag("R9", where, problem)
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
                found.flag("R3", where, "a reasoning item must be immediately followed by its item")
    for call_id, at in sorted(pending.items()):
        found.flag("R2", f"input[{at}]", f"No tool output found for function call {call_id}")
    return found
