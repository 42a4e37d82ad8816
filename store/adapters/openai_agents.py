"""The OpenAI Agents SDK `Session` protocol over convo-store.

    from agents import Agent, Runner
    from store.adapters.openai_agents import ConvoSession

    session = ConvoSession("user-42", repository)   # any store.repository.Repository
    result = await Runner.run(agent, "What is the weather?", session=session)

Each Responses-API input item is one message of the conversation (docs/
adapters.md has the table): `message` items (user, assistant, system,
developer; text, refusal and image parts), `function_call` (an assistant
tool call), `function_call_output` (a tool result) and `reasoning`
(`Reasoning(provider="openai")`) get the store's structure; whatever an
item carries beyond it (ids, status, annotations, ...) is kept in the
message's metadata under `convo_adapter`, so `get_items` returns the items
exactly as they were added. Every other item type (built-in tool calls and
their outputs, item references, types added later) is kept opaque: the raw
item in the metadata (or, when larger than metadata may be, in the content)
and replayed unchanged.

Needs the `openai-agents` extra only for the type names; the class works
with any caller that passes Responses items as dicts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from store.adapters._conversation import ADAPTER_KEY, Conversation, adapter_meta, raw_call_id
from store.adapters._json import arguments_text, parse_arguments, plain
from store.adapters._parts import Unmapped, image_from_url, image_url, text_part
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.messages import (
    ContentPart,
    ImagePart,
    Message,
    Reasoning,
    Role,
    TextPart,
    ToolCall,
)
from store.repository import ConversationRepository

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["ConvoSession", "item_to_message", "message_to_item"]

FORMAT = "openai-agents"
REASONING_PLACEHOLDER = "(reasoning)"
_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
_TEXT_KEYS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}


class ConvoSession:
    """A Agents SDK session kept in a convo-store conversation.

    The session id is the conversation's id (ids are unique per tenant:
    `store.domain.conversation_keys`); it is created on the first `add_items`.
    Several `ConvoSession` objects (tasks, processes) may share a session
    id: appends are serialised by the store, none is lost.
    """

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, repository: ConversationRepository) -> None:
        self.session_id = session_id
        self.repository = repository
        self._conversation = Conversation(repository, session_id)

    @property
    def conversation_id(self) -> Any:
        return self._conversation.id

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The visible window as items, oldest first; the last `limit` with
        one (read from the end: O(limit) at any length)."""
        if limit is None:
            shown = await self._conversation.shown()
        else:
            shown = await self._conversation.last_shown(limit) if limit > 0 else []
        return [cast("TResponseInputItem", message_to_item(m)) for m in shown]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await self._conversation.append([item_to_message(i) for i in items], _orphan)

    async def pop_item(self) -> TResponseInputItem | None:
        """Hide the last item and return it; the log keeps it (see
        `Conversation.pop` for tool calls and results)."""
        popped = await self._conversation.pop(_orphan)
        return None if popped is None else cast("TResponseInputItem", message_to_item(popped))

    async def clear_session(self) -> None:
        """Empty the window (clear with keep_system=False); history stays."""
        await self._conversation.clear()


# --- items -> messages -------------------------------------------------------------------


def item_to_message(item: Any) -> Message:
    """A Responses input item as a message; the framework's call ids stay."""
    raw = plain(item)
    if not isinstance(raw, dict):
        raise TypeError(f"a Responses item is a JSON object, got {type(item).__name__}")
    try:
        message = _structured(raw)
        back = message_to_item(message)
        if back == raw:
            if _order(back) != _order(raw):
                # Kept as added: the store's JSON (jsonb) may not keep key order.
                meta = {**adapter_meta(message), "keys": _order(raw)}
                message = message.model_copy(
                    update={"metadata": {**message.metadata, ADAPTER_KEY: meta}}
                )
            return message
    except (Unmapped, ValidationError, KeyError, TypeError, ValueError):
        pass
    return _opaque(raw)


def _meta(kind: str, **fields: Any) -> dict[str, Any]:
    return {ADAPTER_KEY: {"format": FORMAT, "kind": kind, **fields}}


def _structured(raw: dict[str, Any]) -> Message:
    item = dict(raw)
    kind = item.get("type", "message")
    if kind == "message" and "role" in item:
        role = item.pop("role")
        if role not in _ROLES:
            raise Unmapped(f"role {role!r}")
        content, parts = _content_in(item.pop("content"))
        fields: dict[str, Any] = {"extra": item}
        if parts is not None:
            fields["parts"] = parts
        if _ROLES[role] != role:
            fields["role"] = role
        return Message(role=_ROLES[role], content=content, metadata=_meta("message", **fields))
    if kind == "function_call":
        call_id, name = item.pop("call_id"), item.pop("name")
        arguments, kept = parse_arguments(item.pop("arguments"))
        return Message(
            role="assistant",
            tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),),
            metadata=_meta("function_call", extra=item, **kept),
        )
    if kind == "function_call_output":
        call_id = item.pop("call_id")
        content, parts = _content_in(item.pop("output"), allow_empty=True)
        fields = {"extra": item}
        if parts is not None:
            fields["parts"] = parts
        return Message(
            role="tool",
            tool_call_id=call_id,
            content=content,
            metadata=_meta("function_call_output", **fields),
        )
    if kind == "reasoning":
        item_id = item.pop("id")
        summary = item.pop("summary")
        texts = [text_part(s["text"]).text for s in summary]
        shapes = [{k: v for k, v in s.items() if k != "text"} for s in summary]
        data = None
        if isinstance(item.get("encrypted_content"), str):
            data = item.pop("encrypted_content")
        text = "".join(texts)
        return Message(
            role="assistant",
            content=REASONING_PLACEHOLDER,
            reasoning=(
                Reasoning(provider="openai", item_id=item_id, text=text or None, data=data),
            ),
            metadata=_meta("reasoning", extra=item, summary=[len(t) for t in texts], shapes=shapes),
        )
    raise Unmapped(f"item type {kind!r}")


def _content_in(
    content: Any, *, allow_empty: bool = False
) -> tuple[str | tuple[ContentPart, ...], list[dict[str, Any]] | None]:
    if isinstance(content, str):
        return content, None
    if not isinstance(content, list) or (not content and not allow_empty):
        raise Unmapped("content")
    parts: list[ContentPart] = []
    shapes: list[dict[str, Any]] = []
    for part in content:
        rest = dict(part)
        kind = rest.get("type")
        if kind in _TEXT_KEYS:
            parts.append(text_part(rest.pop(_TEXT_KEYS[kind])))
        elif kind == "input_image":
            parts.append(image_from_url(rest.pop("image_url", None)))
        else:
            raise Unmapped(f"part type {kind!r}")
        shapes.append(rest)
    return tuple(parts), shapes


def _orphan(message: Message) -> Message:
    """A tool result whose call is not in the window: kept opaque."""
    return _opaque(message_to_item(message))


def _opaque(raw: dict[str, Any]) -> Message:
    role = _ROLES.get(str(raw.get("role")), "assistant")
    label = f"[openai item: {str(raw.get('type', 'message'))[:100]}]"
    if json_problem({"item": raw}, max_chars=MAX_METADATA_CHARS - 200) is None:
        return Message(
            role=role, content=label, metadata=_meta("opaque", item=raw, keys=_order(raw))
        )
    # Too large for metadata: the item goes in the content (which has the
    # store's content size limit), as JSON.
    return Message(
        role=role,
        content=json.dumps(raw, ensure_ascii=False),
        metadata=_meta("opaque", item_in="content", label=label),
    )


# --- messages -> items -------------------------------------------------------------------


def _order(item: dict[str, Any]) -> list[Any]:
    """An item's key order: its keys, then each content part's."""
    order: list[Any] = list(item)
    for key in ("content", "output"):
        value = item.get(key)
        if isinstance(value, list) and all(isinstance(p, dict) for p in value):
            order.append([list(p) for p in value])
            break
    return order


def _ordered(item: dict[str, Any], order: list[Any]) -> dict[str, Any]:
    """`item` with its keys (and its content parts' keys) in `order`."""
    keys = [k for k in order if isinstance(k, str)]
    parts = next((p for p in order if isinstance(p, list)), None)
    out = {k: item[k] for k in keys if k in item}
    out.update((k, v) for k, v in item.items() if k not in out)
    if parts is not None:
        for key in ("content", "output"):
            value = out.get(key)
            if isinstance(value, list) and len(value) == len(parts):
                out[key] = [
                    {**{k: p[k] for k in shape if k in p}, **p}
                    for p, shape in zip(value, parts, strict=True)
                ]
                break
    return out


def message_to_item(message: Message) -> dict[str, Any]:
    """A stored (or drafted) message back as the item it was added as, its
    keys in the order they were added. A message not written by this
    adapter is rendered as a plain item."""
    meta = adapter_meta(message)
    item = _item(message, meta)
    order = meta.get("keys")
    return _ordered(item, order) if isinstance(order, list) else item


def _item(message: Message, meta: dict[str, Any]) -> dict[str, Any]:
    kind = meta.get("kind") if meta.get("format") == FORMAT else None
    extra = dict(meta.get("extra") or {})
    if kind == "opaque":
        if meta.get("item_in") == "content":
            return cast(dict[str, Any], json.loads(message.text))
        return cast(dict[str, Any], meta["item"])
    if kind == "reasoning" and message.reasoning:
        block = message.reasoning[0]
        text = block.text or ""
        summary, at = [], 0
        for length, shape in zip(meta.get("summary", []), meta.get("shapes", []), strict=False):
            summary.append({**shape, "text": text[at : at + length]})
            at += length
        item = {**extra, "id": block.item_id, "summary": summary}
        if block.data is not None:
            item["encrypted_content"] = block.data
        return {"type": "reasoning", **item}
    if message.tool_calls:
        call = message.tool_calls[0]
        return {
            **extra,
            "type": "function_call",
            "call_id": raw_call_id(message, call.id),
            "name": call.name,
            "arguments": arguments_text(call.arguments, meta),
        }
    if message.role == "tool":
        return {
            **extra,
            "type": "function_call_output",
            "call_id": raw_call_id(message, message.tool_call_id or ""),
            "output": _content_out(message, meta),
        }
    role = meta.get("role") or message.role
    if kind != "message":  # written by someone else: a plain easy-input message
        return {"role": role, "content": _content_out(message, {})}
    return {**extra, "role": role, "content": _content_out(message, meta)}


def _content_out(message: Message, meta: dict[str, Any]) -> Any:
    content = message.content
    if isinstance(content, str):
        return content
    shapes = meta.get("parts") or []
    out: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        shape = dict(shapes[i]) if i < len(shapes) else {}
        if isinstance(part, TextPart):
            shape.setdefault("type", "input_text" if message.role != "assistant" else "output_text")
            shape[_TEXT_KEYS.get(str(shape["type"]), "text")] = part.text
        elif isinstance(part, ImagePart):
            shape.setdefault("type", "input_image")
            shape["image_url"] = image_url(part)
        out.append(shape)
    return out
