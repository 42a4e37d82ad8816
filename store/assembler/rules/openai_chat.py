"""OpenAI Chat Completions rules O1-O6."""

from __future__ import annotations

from typing import Any

from store.assembler.rules.violation import Violation

ROLES = {"system", "developer", "user", "assistant", "tool"}


def _call_ids(message: dict[str, Any]) -> list[str]:
    return [str(call.get("id")) for call in message.get("tool_calls") or []]


def check(payload: dict[str, Any]) -> list[Violation]:
    messages: list[dict[str, Any]] = payload.get("messages", [])
    found: list[Violation] = []
    seen_ids: set[str] = set()
    waiting: set[str] = set()  # calls of the open tool block still unanswered
    block_ids: set[str] = set()  # calls of the nearest preceding assistant, tool msgs only between
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role")
        if role not in ROLES:
            found.append(Violation(rule="O1", where=where, message=f"unknown role {role!r}"))
        if waiting and role != "tool":
            found.append(
                Violation(
                    rule="O2",
                    where=where,
                    message="An assistant message with 'tool_calls' must be followed by tool "
                    "messages responding to each 'tool_call_id'. The following tool_call_ids "
                    f"did not have response messages: {', '.join(sorted(waiting))}",
                )
            )
            if role in {"system", "developer"}:
                found.append(
                    Violation(rule="O6", where=where, message=f"{role} message inside a tool block")
                )
            waiting = set()
        if role == "assistant":
            ids = _call_ids(message)
            if message.get("content") is None and not ids:
                found.append(
                    Violation(rule="O4", where=where, message="null content without tool_calls")
                )
            for call_id in ids:
                if call_id in seen_ids:
                    found.append(
                        Violation(
                            rule="O5", where=where, message=f"duplicate tool_call id {call_id}"
                        )
                    )
                seen_ids.add(call_id)
            waiting = set(ids)
            block_ids = set(ids)
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in block_ids:
                found.append(
                    Violation(
                        rule="O3",
                        where=where,
                        message="Invalid parameter: messages with role 'tool' must be a response "
                        "to a preceeding message with 'tool_calls'",
                    )
                )
            waiting.discard(call_id)
        else:
            block_ids = set()
    if waiting:
        found.append(
            Violation(
                rule="O2",
                where=f"messages[{len(messages)}]",
                message="tool_call_ids without response messages at the end: "
                + ", ".join(sorted(waiting)),
            )
        )
    return found
