"""Gemini generateContent: `{"systemInstruction": {"parts": [...]},
"contents": [{"role": "user"|"model", "parts": [...]}]}` (rules G1-G3).

Tool calls are `functionCall` parts of a model turn; all results of one
block go in one user content of `functionResponse` parts (a result that is
a JSON object is sent as is; anything else is wrapped as `{"output": ...}`,
or `{"error": ...}` when it is an error). Mid-conversation system messages
become `<system-reminder>` text parts of the user turn at their place. A
stored Gemini thought signature is replayed on the first functionCall part
(or the last part when the turn has no call; a turn with no part at all is
not sent, and its signature with it). A result is read as a JSON object
only when it is strict JSON: `NaN` or `Infinity` in it would make the
request body invalid, so such a result goes as text.
"""

from __future__ import annotations

import json
import math
from typing import Any

from store.assembler.formats.common import (
    CONTINUATION_TEXT,
    Conversation,
    Rendered,
    reasoning_for,
    system_note_text,
    text_parts,
)
from store.assembler.formats.turns import Block, Turns
from store.assembler.tool_images import result_images
from store.domain.messages import ImagePart, Message, TextPart


def _image(part: ImagePart) -> Block:
    if part.data is not None:
        return {"inlineData": {"mimeType": part.media_type, "data": part.data}}
    file_data: dict[str, Any] = {"fileUri": part.url}
    if part.media_type:
        file_data["mimeType"] = part.media_type
    return {"fileData": file_data}


def _user_parts(message: Message) -> list[Block]:
    content = message.content
    if isinstance(content, str):
        return [{"text": content}] if content.strip() else []
    parts: list[Block] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text.strip():
                parts.append({"text": part.text})
        else:
            parts.append(_image(part))
    return parts


def _model_parts(message: Message) -> list[Block]:
    content = message.content
    if isinstance(content, str):
        parts: list[Block] = [{"text": content}] if content.strip() else []
    else:
        parts = [{"text": t} for t in text_parts(message)]
    calls: list[Block] = [
        {"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}}
        for call in message.tool_calls
    ]
    if message.reasoning:
        signature = next(
            (r.signature for r in reasoning_for(message, "gemini") if r.signature), None
        )
        if signature is not None and (calls or parts):
            target = calls[0] if calls else parts[-1]
            target["thoughtSignature"] = signature
    return parts + calls if calls else parts


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e999
        raise ValueError(f"{text} is out of range")
    return number


def response_object(message: Message) -> dict[str, Any]:
    content = message.content
    text = content if isinstance(content, str) else message.text
    if message.is_error:
        return {"error": text}
    if text.lstrip(" \t\n\r")[:1] != "{":
        return {"output": text}  # not a JSON object: skip the parse (and its exception)
    try:
        parsed = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    return {"output": text}


def render(conversation: Conversation) -> Rendered:
    turns = Turns(user_role="user", content_key="parts")
    names: dict[str, str] = {}
    add = turns.add
    for message in conversation.history:
        role = message.role
        if role == "assistant":
            for call in message.tool_calls:
                names[call.id] = call.name
            add("model", _model_parts(message))
        elif role == "tool":
            call_id = message.tool_call_id or ""
            response: dict[str, Any] = {
                "id": call_id,
                "name": names.get(call_id, "unknown"),
                "response": response_object(message),
            }
            images = result_images(message)
            if images:
                # Images from tools go as the functionResponse's own parts.
                response["parts"] = [_image(image) for image in images]
            add("user", [{"functionResponse": response}], 1)
        elif role == "system":
            add("user", [{"text": system_note_text(message)}])
        else:
            add("user", _user_parts(message))
    turns.ensure_user_first({"text": CONTINUATION_TEXT})
    payload: dict[str, Any] = {}
    if conversation.system_prompt is not None:
        payload["systemInstruction"] = {"parts": [{"text": conversation.system_prompt}]}
    payload["contents"] = turns.turns
    return Rendered(payload=payload, repairs=tuple(turns.repairs))
