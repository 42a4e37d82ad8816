"""OpenAI Chat Completions rules O1-O6 (provider-rules.md) and:

- O7 `messages` is a non-empty list;
- O8 tool call ids (and `tool_call_id`s) are 1 to 40 characters ("string too
  long. Expected a string with maximum length 40");
- O9 `function.arguments` is a JSON object in strict JSON (no NaN/Infinity);
- O10 one tool message per tool call (a second result for a call is refused).
"""

from __future__ import annotations

from typing import Any

from store.assembler.rules.json_values import id_problem, strict_json_object
from store.assembler.rules.violation import Violation, Violations

ROLES = {"system", "developer", "user", "assistant", "tool"}
MAX_ID = 40


def _id_problem(value: Any) -> str | None:
    return id_problem(value, name="tool call id", longest=MAX_ID)


def _call_ids(message: dict[str, Any]) -> list[str]:
    return [str(call.get("id")) for call in message.get("tool_calls") or []]


def check(payload: dict[str, Any]) -> list[Violation]:
    messages: list[dict[str, Any]] = payload.get("messages") or []
    found = Violations()
    if not messages:
        found.flag("O7", "messages", "messages must not be empty")
    seen_ids: set[str] = set()
    answered: set[str] = set()
    waiting: set[str] = set()  # calls of the open tool block still unanswered
    block_ids: set[str] = set()  # calls of the nearest preceding assistant, tool msgs only between
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role")
        if role not in ROLES:
            found.flag("O1", where, f"unknown role {role!r}")
        if waiting and role != "tool":
            found.flag(
                "O2",
                where,
                "An assistant message with 'tool_calls' must be followed by tool "
                "messages responding to each 'tool_call_id'. The following tool_call_ids "
                f"did not have response messages: {', '.join(sorted(waiting))}",
            )
            if role in {"system", "developer"}:
                found.flag("O6", where, f"{role} message inside a tool block")
            waiting = set()
        if role == "assistant":
            ids = _call_ids(message)
            if message.get("content") is None and not ids:
                found.flag("O4", where, "null content without tool_calls")
            for k, call in enumerate(message.get("tool_calls") or []):
                call_where = f"{where}.tool_calls[{k}]"
                if problem := _id_problem(call.get("id")):
                    found.flag("O8", call_where, problem)
                function = call.get("function") or {}
                if problem := strict_json_object(function.get("arguments")):
                    found.flag("O9", f"{call_where}.function", problem)
            for call_id in ids:
                if call_id in seen_ids:
                    found.flag("O5", where, f"duplicate tool_call id {call_id}")
                seen_ids.add(call_id)
            waiting = set(ids)
            block_ids = set(ids)
            answered = set()
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            if problem := id_problem(
                message.get("tool_call_id"), name="tool call id", longest=MAX_ID
            ):
                found.flag("O8", where, problem)
            if call_id in answered:
                found.flag("O10", where, f"a second tool message for tool_call_id {call_id}")
            answered.add(call_id)
            if call_id not in block_ids:
                found.flag(
                    "O3",
                    where,
                    "Invalid parameter: messages with role 'tool' must be a response "
                    "to a preceeding message with 'tool_calls'",
                )
            waiting.discard(call_id)
        else:
            block_ids = set()
            answered = set()
    if waiting:
        found.flag(
            "O2",
            f"messages[{len(messages)}]",
            "tool_call_ids without response messages at the end: " + ", ".join(sorted(waiting)),
        )
    return found
