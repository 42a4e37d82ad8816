"""OpenAI Responses: `{"instructions": ..., "input": [items]}` (rules R1-R5).

Items: `message` (user `input_text`/`input_image`, assistant `output_text`),
`function_call`, `function_call_output`, `reasoning`. An assistant message
with text and tool calls keeps its text as a message item before its
`function_call` items (the source dropped it). Stored OpenAI reasoning is
replayed as a `reasoning` item immediately before the first item of the
message it belongs to. A mid-conversation system message becomes a
`developer` message item at its place.
"""

from __future__ import annotations

from typing import Any

from store.assembler.formats.common import (
    Conversation,
    Rendered,
    arguments_json,
    image_url,
    reasoning_for,
    text_parts,
)
from store.messages import ImagePart, Message, TextPart

MID_CONVERSATION_SYSTEM_ROLE = "developer"


def _input_content(message: Message) -> list[dict[str, Any]]:
    content = message.content
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text.strip():
                parts.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            parts.append({"type": "input_image", "image_url": image_url(part), "detail": "auto"})
    return parts


def _reasoning_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in reasoning_for(message, "openai"):
        if not block.item_id:
            continue  # an item without its id cannot be replayed
        item: dict[str, Any] = {"type": "reasoning", "id": block.item_id, "summary": []}
        if block.text:
            item["summary"] = [{"type": "summary_text", "text": block.text}]
        if block.data:
            item["encrypted_content"] = block.data
        items.append(item)
    return items


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    items = _reasoning_items(message) if message.reasoning else []
    content = message.content
    if isinstance(content, str):
        text = content if content.strip() else ""
    else:
        text = "\n".join(text_parts(message))
    if text:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    elif not message.tool_calls:
        return []
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": arguments_json(call.arguments),
            }
        )
    return items


def render_items(message: Message) -> list[dict[str, Any]]:
    role = message.role
    if role == "assistant":
        return _assistant_items(message)
    content = message.content
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": content if isinstance(content, str) else message.text,
            }
        ]
    if role == "system":
        return [
            {
                "type": "message",
                "role": MID_CONVERSATION_SYSTEM_ROLE,
                "content": [
                    {
                        "type": "input_text",
                        "text": content if isinstance(content, str) else message.text,
                    }
                ],
            }
        ]
    return [{"type": "message", "role": "user", "content": _input_content(message)}]


def render(conversation: Conversation) -> Rendered:
    payload: dict[str, Any] = {}
    if conversation.system_prompt is not None:
        payload["instructions"] = conversation.system_prompt
    items: list[dict[str, Any]] = []
    append = items.append
    for message in conversation.history:
        role = message.role
        content = message.content
        if role == "user" and isinstance(content, str):
            # The common case, inline: one user message item.
            append(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": content}],
                }
            )
        else:
            items.extend(render_items(message))
    payload["input"] = items
    return Rendered(payload=payload)
