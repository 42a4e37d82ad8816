"""OpenAI Responses: `{"instructions": ..., "input": [items]}` (rules R1-R5).

Items: `message` (user `input_text`/`input_image`, assistant `output_text`),
`function_call`, `function_call_output`, `reasoning`. An assistant message
with text and tool calls keeps its text as a message item before its
`function_call` items (the source dropped it). Stored OpenAI reasoning is
replayed as a `reasoning` item immediately before the first item of the
message it belongs to, once (an item id already in the payload is not
replayed again: OpenAI refuses duplicate item ids). A mid-conversation
system message becomes a `developer` message item at its place.

An assistant text item is an output message as the SDK types it
(`ResponseOutputMessageParam`): it carries `status: "completed"` and an
`id`, `msg_` and the first 32 hex digits of the sha256 of its text (of the
text and a count, for the second and later items with the same text: ids
are unique in a payload). OpenAI wants message ids to begin with `msg`; the
id is the same at every build, so the prefix cache holds. Call ids longer
than 64 characters are renamed (`tool_ids`).
"""

from __future__ import annotations

from hashlib import sha256
from typing import Any

from store.assembler.diagnostics import Repair, RepairKind
from store.assembler.formats.common import (
    Conversation,
    Rendered,
    arguments_json,
    image_url,
    reasoning_for,
    text_parts,
)
from store.assembler.tool_ids import OPENAI_RESPONSES, provider_ids
from store.assembler.tool_images import result_images
from store.domain.messages import ImagePart, Message, TextPart

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


class ItemIds:
    """The item ids of one payload: unique, as OpenAI requires."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.repairs: list[Repair] = []

    def message(self, text: str) -> str:
        """A `msg_` id from the text (and a count, when the text came before)."""
        data = text.encode("utf-8", "surrogatepass")
        item_id = f"msg_{sha256(data).hexdigest()[:32]}"
        n = 1
        while item_id in self.used:
            n += 1
            item_id = f"msg_{sha256(b'%d:' % n + data).hexdigest()[:32]}"
        self.used.add(item_id)
        return item_id

    def reasoning(self, item_id: str) -> bool:
        """Whether the reasoning item may be replayed (its id is not already in)."""
        if item_id in self.used:
            self.repairs.append(
                Repair(
                    kind=RepairKind.DROPPED_DUPLICATE_REASONING,
                    detail=f"reasoning item {item_id!r} is replayed once, not again",
                )
            )
            return False
        self.used.add(item_id)
        return True


def _reasoning_items(message: Message, item_ids: ItemIds) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in reasoning_for(message, "openai"):
        if not block.item_id or not item_ids.reasoning(block.item_id):
            continue  # an item without its id cannot be replayed; one with a used id is in
        item: dict[str, Any] = {"type": "reasoning", "id": block.item_id, "summary": []}
        if block.text:
            item["summary"] = [{"type": "summary_text", "text": block.text}]
        if block.data:
            item["encrypted_content"] = block.data
        items.append(item)
    return items


def assistant_text_item(text: str, item_ids: ItemIds) -> dict[str, Any]:
    """An assistant's text as an output message item, with its `msg_` id."""
    return {
        "type": "message",
        "role": "assistant",
        "id": item_ids.message(text),
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _assistant_items(
    message: Message, ids: dict[str, str], item_ids: ItemIds
) -> list[dict[str, Any]]:
    content = message.content
    if isinstance(content, str):
        text = content if content.strip() else ""
    else:
        text = "\n".join(text_parts(message))
    if not text and not message.tool_calls:
        return []  # nothing for its reasoning to go with
    items = _reasoning_items(message, item_ids) if message.reasoning else []
    if text:
        items.append(assistant_text_item(text, item_ids))
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": ids.get(call.id, call.id),
                "name": call.name,
                "arguments": arguments_json(call.arguments),
            }
        )
    return items


def _output(message: Message) -> str | list[dict[str, Any]]:
    """A result's output: its text, or with images from the tool, a list of
    `input_text` and `input_image` items."""
    images = result_images(message)
    if not images:
        return message.text
    text = message.text
    texts = [{"type": "input_text", "text": text}] if text.strip() else []
    return [
        *texts,
        *({"type": "input_image", "image_url": image_url(i), "detail": "auto"} for i in images),
    ]


def render_items(message: Message, ids: dict[str, str], item_ids: ItemIds) -> list[dict[str, Any]]:
    role = message.role
    if role == "assistant":
        return _assistant_items(message, ids, item_ids)
    content = message.content
    if role == "tool":
        call_id = message.tool_call_id or ""
        return [
            {
                "type": "function_call_output",
                "call_id": ids.get(call_id, call_id),
                "output": content if isinstance(content, str) else _output(message),
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
    ids, renamed = provider_ids(conversation.history, OPENAI_RESPONSES)
    item_ids = ItemIds()
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
            items.extend(render_items(message, ids, item_ids))
    payload["input"] = items
    return Rendered(payload=payload, repairs=(*renamed, *item_ids.repairs))
