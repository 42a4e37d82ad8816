"""The logical sequence of a payload, format-independent (behaviours §2:
"the same conversation gives the same logical sequence in every format").

Normalised away, because they are each provider's shape and not content:
turn boundaries (consecutive text of one role is joined with "\\n"), the
`<system-reminder>` wrapper (a wrapped user text counts as system text),
the minimal continuation user turn, trailing whitespace, reasoning/thinking
data, `is_error` flags, how a tool result is wrapped (Gemini's
{"output": ...} / {"error": ...}; JSON objects compare canonically; a blank
result is empty, as Anthropic sends it without content), and how tool ids
are spelled (each provider renames the ids it refuses, so ids compare by
order of first appearance: the first id seen is `#0`, and so on), and where
images returned by tools go (in the result, or for OpenAI Chat in a user
message after the results): they compare as one sorted list at the end.
"""

from __future__ import annotations

import json
import re
from typing import Any

from store.assembler.formats.common import CONTINUATION_TEXT

Event = tuple[str, ...]
_REMINDER = re.compile(r"<system-reminder>\n(.*)\n</system-reminder>", re.DOTALL)
_IMAGES_NOTE = re.compile(r"\[images returned by tool call (.+)\]")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _result_text(text: Any) -> str:
    if isinstance(text, list):  # text and images from the tool: its text here
        text = "".join(p["text"] for p in text if p["type"] in {"text", "input_text"})
    if not text.strip():
        return ""
    try:
        parsed = json.loads(text)
    except ValueError:
        return str(text)
    return _canonical(parsed) if isinstance(parsed, dict) else str(text)


def _text(role: str, text: str) -> Event:
    match = _REMINDER.fullmatch(text)
    if role == "user" and match:
        return ("text", "system", match.group(1))
    return ("text", role, text)


def _openai_chat(payload: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    for message in payload["messages"]:
        role, content = message["role"], message.get("content")
        if role == "tool":
            events.append(("result", message["tool_call_id"], _result_text(content)))
            continue
        if isinstance(content, str) and content:
            events.append(_text(role, content))
        elif isinstance(content, list):
            from_tool = None  # the call whose images follow its note
            for part in content:
                note = _IMAGES_NOTE.fullmatch(part.get("text", "")) if role == "user" else None
                if note:
                    from_tool = note.group(1)
                elif part["type"] == "text":
                    from_tool = None
                    events.append(_text(role, part["text"]))
                elif from_tool is not None:
                    events.append(("tool_image", from_tool, part["image_url"]["url"]))
                else:
                    events.append(("image", part["image_url"]["url"]))
        for call in message.get("tool_calls", []):
            function = call["function"]
            arguments = _canonical(json.loads(function["arguments"]))
            events.append(("call", call["id"], function["name"], arguments))
    return events


def _responses(payload: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    if "instructions" in payload:
        events.append(("text", "system", payload["instructions"]))
    for item in payload["input"]:
        kind = item["type"]
        if kind == "message":
            role = "system" if item["role"] in {"system", "developer"} else item["role"]
            for part in item["content"]:
                if part["type"] in {"input_text", "output_text"}:
                    events.append(_text(role, part["text"]))
                else:
                    events.append(("image", part["image_url"]))
        elif kind == "function_call":
            arguments = _canonical(json.loads(item["arguments"]))
            events.append(("call", item["call_id"], item["name"], arguments))
        elif kind == "function_call_output":
            events.append(("result", item["call_id"], _result_text(item["output"])))
            if isinstance(item["output"], list):
                events.extend(
                    ("tool_image", item["call_id"], p["image_url"])
                    for p in item["output"]
                    if p["type"] == "input_image"
                )
    return events


def _anthropic(payload: dict[str, Any]) -> list[Event]:
    events: list[Event] = [("text", "system", b["text"]) for b in payload.get("system", [])]
    for message in payload["messages"]:
        role = message["role"]
        for block in message["content"]:
            kind = block["type"]
            if kind == "text":
                events.append(_text(role, block["text"]))
            elif kind == "image":
                events.append(("image", _anthropic_image(block)))
            elif kind == "tool_use":
                events.append(("call", block["id"], block["name"], _canonical(block["input"])))
            elif kind == "tool_result":
                content = block.get("content", "")
                events.append(("result", block["tool_use_id"], _result_text(content)))
                if isinstance(content, list):
                    events.extend(
                        ("tool_image", block["tool_use_id"], _anthropic_image(b))
                        for b in content
                        if b["type"] == "image"
                    )
    return events


def _anthropic_image(block: dict[str, Any]) -> str:
    source = block["source"]
    return str(source.get("url") or f"data:{source['media_type']};base64,{source['data']}")


def _gemini_image(part: dict[str, Any]) -> str:
    if "inlineData" in part:
        data = part["inlineData"]
        return f"data:{data['mimeType']};base64,{data['data']}"
    return str(part["fileData"]["fileUri"])


def _gemini(payload: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    for part in payload.get("systemInstruction", {}).get("parts", []):
        events.append(("text", "system", part["text"]))
    for content in payload["contents"]:
        role = "assistant" if content["role"] == "model" else "user"
        for part in content["parts"]:
            if "text" in part:
                events.append(_text(role, part["text"]))
            elif "inlineData" in part or "fileData" in part:
                events.append(("image", _gemini_image(part)))
            elif "functionCall" in part:
                call = part["functionCall"]
                events.append(("call", call["id"], call["name"], _canonical(call["args"])))
            elif "functionResponse" in part:
                response = part["functionResponse"]
                body = response["response"]
                if set(body) in ({"output"}, {"error"}) and isinstance(
                    next(iter(body.values())), str
                ):
                    text = _result_text(next(iter(body.values())))
                else:
                    text = _canonical(body)
                events.append(("result", response["id"], text))
                events.extend(
                    ("tool_image", response["id"], _gemini_image(p))
                    for p in response.get("parts", [])
                )
    return events


_EXTRACTORS = {
    "openai-chat": _openai_chat,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}


def logical_sequence(format: str, payload: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    ids: dict[str, str] = {}
    from_tools: list[Event] = []
    for event in _EXTRACTORS[format](payload):
        if event[0] == "tool_image":
            from_tools.append(("tool_image", ids.get(event[1], event[1]), event[2]))
            continue
        if event[0] in {"call", "result"}:
            event = (event[0], ids.setdefault(event[1], f"#{len(ids)}"), *event[2:])
        if event[0] == "text":
            text = event[2].rstrip()
            if not text.strip() or (event[1] == "user" and text == CONTINUATION_TEXT):
                continue
            if events and events[-1][0] == "text" and events[-1][1] == event[1]:
                events[-1] = ("text", event[1], f"{events[-1][2]}\n{text}")
                continue
            event = ("text", event[1], text)
        events.append(event)
    return events + sorted(from_tools)
