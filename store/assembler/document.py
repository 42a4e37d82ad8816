"""The offline input document of `convo assemble`, read into assembler values.

    {"messages": [...], "agent": {...}, "slots": {...}, "options": {...}}

Messages are OpenAI-Chat-shaped (role, content, tool_calls with id /
function.name / function.arguments — a JSON string as OpenAI sends it, or an
object — tool_call_id, and an assistant's "reasoning_content" as
OpenAI-compatible endpoints return it) plus optional "kind", "agent",
"is_error" and "reasoning". The custom system prompt is agent.system_prompt, or else a
first message with role system (not a reminder). Every problem raises
`DocumentError` with a one-line message naming where it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from store.assembler.options import AssembleOptions
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.messages import MAIN_AGENT, ImagePart, Message, MessageKind, TextPart, ToolCall


class DocumentError(ValueError):
    """The input document is not what `convo assemble` reads."""


@dataclass(frozen=True, kw_only=True)
class AssembleRequest:
    messages: tuple[Message, ...]
    profile: AgentProfile
    slots: ContextSlots
    options: AssembleOptions


def _one_line(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DocumentError(f"{where} must be a JSON object")
    return value


def _part(part: Any, where: str) -> TextPart | ImagePart:
    part = _object(part, where)
    kind = part.get("type")
    if kind == "text":
        return TextPart(text=str(part.get("text", "")))
    if kind == "image_url":
        url = str(_object(part.get("image_url"), f"{where}.image_url").get("url", ""))
        if url.startswith("data:") and ";base64," in url:
            media_type, data = url[5:].split(";base64,", 1)
            return ImagePart(data=data, media_type=media_type)
        return ImagePart(url=url)
    if kind == "image":
        return ImagePart.model_validate({k: v for k, v in part.items()})
    raise DocumentError(f"{where}: unknown content part type {kind!r}")


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as error:
            raise DocumentError(f"{where}: arguments are not valid JSON ({error})") from None
    return _object(raw, f"{where} (arguments)")


def _tool_call(call: Any, where: str) -> ToolCall:
    call = _object(call, where)
    function = _object(call.get("function", {}), f"{where}.function")
    return ToolCall(
        id=str(call.get("id", "")),
        name=str(function.get("name", "")),
        arguments=_arguments(function.get("arguments"), f"{where}.function"),
    )


def _message(raw: Any, index: int) -> Message:
    where = f"messages[{index}]"
    raw = _object(raw, where)
    content = raw.get("content")
    if isinstance(content, list):
        content = tuple(_part(p, f"{where}.content[{k}]") for k, p in enumerate(content))
    fields: dict[str, Any] = {
        "role": raw.get("role"),
        "content": "" if content is None else content,
        "tool_calls": tuple(
            _tool_call(c, f"{where}.tool_calls[{k}]")
            for k, c in enumerate(raw.get("tool_calls") or [])
        ),
        "tool_call_id": raw.get("tool_call_id"),
        "is_error": bool(raw.get("is_error", False)),
        "reasoning": tuple(raw.get("reasoning") or ()),
        "agent_id": raw.get("agent") or MAIN_AGENT,
    }
    if raw.get("kind") is not None:
        fields["kind"] = raw["kind"]
    if "reasoning_content" in raw:  # as OpenAI-compatible Chat endpoints return it
        fields["reasoning_content"] = raw["reasoning_content"]
    try:
        return Message.model_validate(fields)
    except ValidationError as error:
        raise DocumentError(f"{where}: {_one_line(error)}") from None


def _slots(raw: dict[str, Any]) -> ContextSlots:
    todo = raw.get("todo") or []
    if not isinstance(todo, list):
        raise DocumentError("slots.todo must be a list of {id, content, status}")
    custom = {k: v for k, v in raw.items() if k not in {"todo", "useful_info", "folder_notes"}}
    for name, value in custom.items():
        if not isinstance(value, str):
            raise DocumentError(f"slots.{name} must be text")
    items = []
    for k, item in enumerate(todo):
        try:
            items.append(TodoItem.model_validate(item))
        except ValidationError as error:
            raise DocumentError(f"slots.todo[{k}]: {_one_line(error)}") from None
    try:
        return ContextSlots(
            todo=tuple(items),
            useful_info=raw.get("useful_info"),
            folder_notes=raw.get("folder_notes"),
            custom=custom,
        )
    except ValidationError as error:
        raise DocumentError(f"slots: {_one_line(error)}") from None


def read_document(text: str, *, overrides: dict[str, Any] | None = None) -> AssembleRequest:
    """Parse the document; `overrides` (e.g. policy, n from flags) win over its options."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise DocumentError(f"input is not valid JSON: {error}") from None
    document = _object(document, "the document")
    raw_messages = document.get("messages", [])
    if not isinstance(raw_messages, list):
        raise DocumentError("messages must be a list")
    messages = [_message(m, i) for i, m in enumerate(raw_messages)]
    agent = _object(document.get("agent") or {}, "agent")
    system_prompt = agent.get("system_prompt")
    first_is_prompt = bool(messages) and messages[0].role == "system"
    if system_prompt is None and first_is_prompt and messages[0].kind is not MessageKind.REMINDER:
        system_prompt = messages.pop(0).text
    agent_id = str(agent.get("id") or MAIN_AGENT)
    try:
        profile = AgentProfile(
            agent_id=agent_id,
            is_sub_agent=bool(agent.get("sub_agent", agent_id != MAIN_AGENT)),
            system_prompt=system_prompt,
            role_definition=agent.get("role_definition"),
        )
        options_raw = _object(document.get("options") or {}, "options")
        if "token_counter" in options_raw:
            raise DocumentError("options.token_counter cannot be set from JSON")
        options = AssembleOptions.model_validate({**options_raw, **(overrides or {})})
    except ValidationError as error:
        raise DocumentError(_one_line(error)) from None
    return AssembleRequest(
        messages=tuple(messages),
        profile=profile,
        slots=_slots(_object(document.get("slots") or {}, "slots")),
        options=options,
    )
