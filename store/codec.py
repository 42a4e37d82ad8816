"""Messages as the log stores them, and back, without validating twice.

A message is validated once, on the way in (`store.validation`). The log
keeps its JSON compactly: top-level fields at their default are left out
(the model restores them) — except `role` and `kind`, which say what the
message is and must never be inferred again.

On the way out, stored JSON becomes `Message`/`StoredMessage` values by
construction, not validation: the log only holds what was valid when it
was written, and re-validating every row was most of what a 5,000-message
payload build cost (see docs/storage.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from store.messages import (
    MAIN_AGENT,
    ContentPart,
    ImagePart,
    Message,
    MessageKind,
    Reasoning,
    StoredMessage,
    TextPart,
    ToolCall,
)

# Top-level fields a stored message may leave out, with the value a reader
# restores. Nested values (parts, calls, reasoning) are kept whole.
_DEFAULTS: dict[str, Any] = {
    "content": "",
    "tool_calls": [],
    "tool_call_id": None,
    "is_error": False,
    "reasoning": [],
    "agent_id": MAIN_AGENT,
    "client_message_id": None,
    "token_estimate": None,
    "metadata": {},
}

_KINDS = {kind.value: kind for kind in MessageKind}


def encode_message(message: Message) -> dict[str, Any]:
    """The JSON the log keeps for `message`: defaults left out."""
    data = message.model_dump(mode="json", include=set(Message.model_fields))
    return {k: v for k, v in data.items() if k not in _DEFAULTS or _DEFAULTS[k] != v}


def _part(raw: Mapping[str, Any]) -> ContentPart:
    if raw["type"] == "text":
        return TextPart.model_construct(text=raw["text"])
    return ImagePart.model_construct(
        url=raw.get("url"), data=raw.get("data"), media_type=raw.get("media_type")
    )


def _fields(data: Mapping[str, Any], content: Any) -> dict[str, Any]:
    get = data.get
    if content is None:
        content = get("content", "")
    calls = get("tool_calls")
    reasoning = get("reasoning")
    return {
        "role": data["role"],
        "content": content if isinstance(content, str) else tuple(map(_part, content)),
        "tool_calls": tuple(
            ToolCall.model_construct(id=c["id"], name=c["name"], arguments=c.get("arguments", {}))
            for c in calls
        )
        if calls
        else (),
        "tool_call_id": get("tool_call_id"),
        "is_error": get("is_error", False),
        "reasoning": tuple(Reasoning.model_construct(**r) for r in reasoning) if reasoning else (),
        "agent_id": get("agent_id", MAIN_AGENT),
        "kind": _KINDS[data["kind"]],
        "client_message_id": get("client_message_id"),
        "token_estimate": get("token_estimate"),
        "metadata": get("metadata") or {},
    }


def decode_message(data: Mapping[str, Any], *, content: Any = None) -> Message:
    """A `Message` from stored JSON (`content`: an edit's content, if any)."""
    return Message.model_construct(**_fields(data, content))


def decode_stored(
    data: Mapping[str, Any],
    *,
    seq: int,
    batch: int,
    role_ordinal: int,
    recorded_at: datetime | None,
    edited_content: Any = None,
    token_estimate: int | None = None,
) -> StoredMessage:
    """A `StoredMessage` from stored JSON and its row's columns.

    An edited message carries the edit's content and token estimate.
    """
    fields = _fields(data, edited_content)
    if edited_content is not None:
        fields["token_estimate"] = token_estimate
    return StoredMessage.model_construct(
        **fields,
        seq=seq,
        batch=batch,
        role_ordinal=role_ordinal,
        recorded_at=recorded_at,
        edited=edited_content is not None,
    )


def message_text(data: Mapping[str, Any], content: Any = None) -> str:
    """A stored message's text (`Message.text`), without building the message."""
    if content is None:
        content = data.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")
