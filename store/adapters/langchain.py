"""LangChain's `BaseChatMessageHistory` over convo-store.

    from store.adapters.langchain import ConvoChatMessageHistory

    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ConvoChatMessageHistory(session_id, repository),
        input_messages_key="question",
        history_messages_key="history",
    )

Each LangChain message is one message of the conversation: `HumanMessage`
→ user, `AIMessage` → assistant (its `tool_calls` become tool calls),
`ToolMessage` → a tool result (`status="error"` → `is_error`),
`SystemMessage` → system; text and image content blocks become parts.
Everything else a message carries (id, name, additional_kwargs,
response_metadata, usage_metadata, block fields, ...) is kept in the
message's metadata under `convo_adapter`, so messages come back equal.
Other message classes, or messages whose content does not map (files,
audio, tool calls without an id), are kept opaque: the serialised message
(`messages_to_dict`) in the metadata, replayed unchanged.

Sync and async: the async methods (`aget_messages`, `aadd_messages`,
`aclear`) run on the caller's loop. The sync ones (`messages`,
`add_messages`, `clear`) run the async call on another loop and wait: the
loop given as `loop=` (the one the repository's storage lives on, running
in another thread), else the adapters' private background loop
(`store.adapters.langchain.background_loop()`, a daemon thread). A
PostgreSQL repository used from sync code must be connected on that loop:
`storage = run_sync(PostgresStorage.connect(url))`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from pydantic import ValidationError

from store.adapters._conversation import ADAPTER_KEY, Conversation, adapter_meta, raw_call_id
from store.adapters._json import plain
from store.adapters._loop import background_loop, run_sync
from store.adapters._parts import Unmapped, image_from_url, image_url, text_part
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.messages import ContentPart, ImagePart, Message, Role, TextPart, ToolCall
from store.repository import ConversationRepository

__all__ = [
    "ConvoChatMessageHistory",
    "background_loop",
    "from_langchain",
    "run_sync",
    "to_langchain",
]

FORMAT = "langchain"
_ROLES: dict[str, Role] = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_TYPES = {role: kind for kind, role in _ROLES.items()}


class ConvoChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history kept in a convo-store conversation (one per
    `session_id`, created on the first write; see store.adapters._conversation)."""

    def __init__(
        self,
        session_id: str,
        repository: ConversationRepository,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.session_id = session_id
        self.repository = repository
        self._loop = loop
        self._conversation = Conversation(repository, session_id)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return run_sync(self.aget_messages(), self._loop)

    async def aget_messages(self) -> list[BaseMessage]:
        return [to_langchain(m) for m in await self._conversation.shown()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        run_sync(self.aadd_messages(messages), self._loop)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await self._conversation.append([from_langchain(m) for m in messages], _orphan)

    def clear(self) -> None:
        run_sync(self.aclear(), self._loop)

    async def aclear(self) -> None:
        """Empty the window (clear with keep_system=False); history stays."""
        await self._conversation.clear()


# --- LangChain -> store -----------------------------------------------------------------


def from_langchain(message: BaseMessage) -> Message:
    """A LangChain message as a store message (tool call ids as LangChain's)."""
    dumped = plain(message_to_dict(message))
    try:
        stored = _structured(dumped["type"], dict(dumped["data"]))
        if plain(message_to_dict(to_langchain(stored))) == dumped:
            return stored
    except (Unmapped, ValidationError, KeyError, TypeError, ValueError):
        pass
    return _opaque(dumped)


def _meta(**fields: Any) -> dict[str, Any]:
    return {ADAPTER_KEY: {"format": FORMAT, **fields}}


def _structured(kind: str, data: dict[str, Any]) -> Message:
    if kind not in _ROLES or data.get("type") != kind:
        raise Unmapped(f"message type {kind!r}")
    data.pop("type")
    content, parts = _content_in(data.pop("content"))
    fields: dict[str, Any] = {}
    if parts is not None:
        fields["parts"] = parts
    role = _ROLES[kind]
    calls: tuple[ToolCall, ...] = ()
    if kind == "ai":
        shapes = []
        found = []
        for call in data.pop("tool_calls", []):
            rest = dict(call)
            found.append(
                ToolCall(id=rest.pop("id"), name=rest.pop("name"), arguments=rest.pop("args"))
            )
            shapes.append(rest)
        calls = tuple(found)
        fields["calls"] = shapes
    tool_call_id = data.pop("tool_call_id") if kind == "tool" else None
    is_error = kind == "tool" and data.get("status") == "error"
    return Message(
        role=role,
        content=content,
        tool_calls=calls,
        tool_call_id=tool_call_id,
        is_error=is_error,
        metadata=_meta(kind="message", extra=data, **fields),
    )


def _content_in(content: Any) -> tuple[str | tuple[ContentPart, ...], list[Any] | None]:
    if isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        raise Unmapped("content")
    parts: list[ContentPart] = []
    shapes: list[Any] = []
    for block in content:
        if isinstance(block, str):
            parts.append(text_part(block))
            shapes.append("str")
            continue
        rest = dict(block)
        kind = rest.get("type")
        if kind == "text":
            parts.append(text_part(rest.pop("text")))
        elif kind == "image_url" and isinstance(rest.get("image_url"), dict):
            inner = dict(rest.pop("image_url"))
            parts.append(image_from_url(inner.pop("url", None)))
            rest["image_url"] = inner
        elif kind == "image_url":
            parts.append(image_from_url(rest.pop("image_url", None)))
            rest["image_url_str"] = True
        elif kind == "image" and isinstance(rest.get("url"), str):
            parts.append(image_from_url(rest.pop("url")))
        elif kind == "image" and isinstance(rest.get("base64"), str):
            parts.append(ImagePart(data=rest.pop("base64"), media_type=rest.pop("mime_type")))
        else:
            raise Unmapped(f"content block {kind!r}")
        shapes.append(rest)
    return tuple(parts), shapes


def _orphan(message: Message) -> Message:
    """A tool result whose call is not in the window: kept opaque."""
    return _opaque(plain(message_to_dict(to_langchain(message))))


def _opaque(dumped: dict[str, Any]) -> Message:
    kind = str(dumped.get("type"))
    role = _ROLES.get(kind, "assistant")
    role = "assistant" if role == "tool" else role
    label = f"[langchain message: {kind[:100]}]"
    if json_problem({"item": dumped}, max_chars=MAX_METADATA_CHARS - 200) is None:
        return Message(role=role, content=label, metadata=_meta(kind="opaque", item=dumped))
    return Message(
        role=role,
        content=json.dumps(dumped, ensure_ascii=False),
        metadata=_meta(kind="opaque", item_in="content", label=label),
    )


# --- store -> LangChain -----------------------------------------------------------------


def to_langchain(message: Message) -> BaseMessage:
    """A store message as a LangChain message (written by this adapter: as
    it was added; otherwise the plain equivalent)."""
    meta = adapter_meta(message)
    ours = meta.get("format") == FORMAT
    if ours and meta.get("kind") == "opaque":
        if meta.get("item_in") == "content":
            return messages_from_dict([json.loads(message.text)])[0]
        return messages_from_dict([meta["item"]])[0]
    data: dict[str, Any] = dict(meta.get("extra") or {}) if ours else {}
    kind = _TYPES[message.role]
    data["type"] = kind
    data["content"] = _content_out(message, meta.get("parts") if ours else None)
    if message.tool_calls:
        shapes = meta.get("calls") or [] if ours else []
        data["tool_calls"] = [
            {
                **(shapes[i] if i < len(shapes) else {"type": "tool_call"}),
                "id": raw_call_id(message, call.id),
                "name": call.name,
                "args": call.arguments,
            }
            for i, call in enumerate(message.tool_calls)
        ]
    if message.role == "tool":
        data["tool_call_id"] = raw_call_id(message, message.tool_call_id or "")
        if not ours and message.is_error:
            data["status"] = "error"
    return messages_from_dict([{"type": kind, "data": data}])[0]


def _content_out(message: Message, shapes: Any) -> Any:
    content = message.content
    if isinstance(content, str):
        return content
    shapes = shapes if isinstance(shapes, list) else []
    out: list[Any] = []
    for i, part in enumerate(content):
        shape = shapes[i] if i < len(shapes) else {}
        if shape == "str" and isinstance(part, TextPart):
            out.append(part.text)
            continue
        block = dict(shape) if isinstance(shape, dict) else {}
        if isinstance(part, TextPart):
            block.setdefault("type", "text")
            block["text"] = part.text
        elif isinstance(part, ImagePart):
            kind = block.setdefault("type", "image_url")
            if kind == "image" and part.data is not None:
                block["base64"], block["mime_type"] = part.data, part.media_type
            elif kind == "image":
                block["url"] = image_url(part)
            elif block.pop("image_url_str", False):
                block["image_url"] = image_url(part)
            else:
                block["image_url"] = {**block.get("image_url", {}), "url": image_url(part)}
        out.append(block)
    return out
