"""OpenAI Chat Completions: `{"messages": [...]}` (provider rules O1-O6).

The system prompt is the first system message; a mid-conversation system
message (a reminder, a summary) stays a system message at its place; tool
call arguments are JSON strings; an assistant message's content is null only
when it carries tool calls. Tool ids longer than 40 characters are renamed
(`tool_ids`). A tool message takes text only: images returned by tools
follow the block's results in one user message (`tool_images`).

Reasoning: OpenAI's own Chat Completions has no field for it, but the
OpenAI-compatible endpoints that think (DeepSeek, Qwen, Kimi, ...) return it
as `reasoning_content` on the assistant message and expect the current
tool-use loop's back in the same field (earlier turns' left out). Stored
reasoning of that provider (`CHAT_REASONING`) is sent so, as
`options.chat_reasoning` says; other providers' reasoning (signed thinking,
encrypted items) has no place here and is left out. Both are counted in
the diagnostics (`ReasoningReplay`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.assembler.diagnostics import ReasoningReplay, Repair, RepairKind
from store.assembler.formats.common import (
    Conversation,
    Rendered,
    arguments_json,
    image_url,
    text_parts,
)
from store.assembler.options import ChatReasoning
from store.assembler.special_block import SPECIAL_SLOT
from store.assembler.tool_ids import OPENAI_CHAT, provider_ids
from store.assembler.tool_images import images_note, result_images
from store.domain.messages import CHAT_REASONING, ImagePart, Message, TextPart


def user_content(message: Message) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            if part.text.strip():
                parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            parts.append({"type": "image_url", "image_url": {"url": image_url(part)}})
    return parts


_NONE: dict[str, str] = {}


def render_message(message: Message, ids: dict[str, str] = _NONE) -> dict[str, Any]:
    role = message.role
    content = message.content
    if role == "assistant":
        if isinstance(content, str):
            text = content if content.strip() else ""
        else:
            text = "\n".join(text_parts(message))
        rendered: dict[str, Any] = {"role": "assistant", "content": text or None}
        if message.tool_calls:
            rendered["tool_calls"] = [
                {
                    "id": ids.get(call.id, call.id),
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments_json(call.arguments)},
                }
                for call in message.tool_calls
            ]
        elif not text:
            rendered["content"] = ""
        return rendered
    if role == "tool":
        text = content if isinstance(content, str) else message.text
        call_id = message.tool_call_id or ""
        return {"role": "tool", "tool_call_id": ids.get(call_id, call_id), "content": text}
    if role == "system":
        return {"role": "system", "content": content if isinstance(content, str) else message.text}
    return {
        "role": "user",
        "content": content if isinstance(content, str) else user_content(message),
    }


def loop_start(history: Sequence[Message]) -> int:
    """Where the current tool-use loop starts: just after the last user
    message (the special block's messages are not the user's)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "user" and SPECIAL_SLOT not in message.metadata:
            return index + 1
    return 0


def sent_reasoning(history: Sequence[Message], mode: ChatReasoning) -> list[Message]:
    """`history` with each message's reasoning as Chat sends it: the
    replayed ones keep their `CHAT_REASONING` items, the rest none."""
    start = _replay_start(history, mode)
    out: list[Message] = []
    for index, message in enumerate(history):
        if message.reasoning:
            kept = tuple(
                r
                for r in message.reasoning
                if index >= start and message.role == "assistant" and r.provider == CHAT_REASONING
            )
            if kept != message.reasoning:
                message = message.model_copy(update={"reasoning": kept})
        out.append(message)
    return out


def _replay_start(history: Sequence[Message], mode: ChatReasoning) -> int:
    """The first position whose reasoning `mode` sends back."""
    if mode is ChatReasoning.OFF:
        return len(history)
    if mode is ChatReasoning.CURRENT_TOOL_LOOP:
        return loop_start(history)
    return 0


def _replay(
    history: tuple[Message, ...],
    rendered: list[dict[str, Any]],
    at: list[int],
    mode: ChatReasoning,
) -> ReasoningReplay | None:
    """Put each replayed assistant message's reasoning in its rendered
    message (`rendered[at[i]]` is `history[i]`'s); what was done, or None
    when no message carries reasoning."""
    if not any(m.reasoning for m in history):
        return None
    start = _replay_start(history, mode)
    replayed = left_out = others = 0
    for index, message in enumerate(history):
        if not message.reasoning or message.role != "assistant":
            continue
        texts = [r.text for r in message.reasoning if r.provider == CHAT_REASONING and r.text]
        others += any(r.provider != CHAT_REASONING for r in message.reasoning)
        if not texts:
            continue
        if index >= start:
            rendered[at[index]]["reasoning_content"] = "\n".join(texts)
            replayed += 1
        else:
            left_out += 1
    return ReasoningReplay(
        mode=mode.value, replayed=replayed, left_out=left_out, other_providers=others
    )


def render(
    conversation: Conversation, reasoning: ChatReasoning = ChatReasoning.CURRENT_TOOL_LOOP
) -> Rendered:
    ids, renamed = provider_ids(conversation.history, OPENAI_CHAT)
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt is not None:
        messages.append({"role": "system", "content": conversation.system_prompt})
    append = messages.append
    # Where each history message was rendered: images from tools add
    # messages of their own.
    at: list[int] = []
    mark = at.append
    images: list[dict[str, Any]] = []  # from the results of the block under way
    moved: list[Repair] = []
    for message in conversation.history:
        # The common cases inline: plain text from the user, or from the
        # assistant without tool calls.
        content = message.content
        role = message.role
        if images and role != "tool":
            moved.append(_images_message(messages, images))
            images = []
        mark(len(messages))
        if content.__class__ is str and role == "user":
            append({"role": "user", "content": content})
        elif content.__class__ is str and role == "assistant" and not message.tool_calls:
            append({"role": "assistant", "content": content if content.strip() else ""})
        else:
            append(render_message(message, ids))
            if role == "tool" and content.__class__ is not str:
                images.extend(_tool_images(message, ids))
    if images:
        moved.append(_images_message(messages, images))
    replay = _replay(conversation.history, messages, at, reasoning)
    return Rendered(payload={"messages": messages}, repairs=(*renamed, *moved), reasoning=replay)


def _tool_images(message: Message, ids: dict[str, str]) -> list[dict[str, Any]]:
    """A result's images as user content parts, after a line naming its call."""
    found = result_images(message)
    if not found:
        return []
    call_id = message.tool_call_id or ""
    return [
        {"type": "text", "text": images_note(ids.get(call_id, call_id))},
        *({"type": "image_url", "image_url": {"url": image_url(i)}} for i in found),
    ]


def _images_message(messages: list[dict[str, Any]], parts: list[dict[str, Any]]) -> Repair:
    """Add the user message carrying a block's images from tools, right
    after its results (Chat's tool messages take text only)."""
    messages.append({"role": "user", "content": parts})
    return Repair(
        kind=RepairKind.MOVED_TOOL_RESULT_IMAGES,
        detail="images from tool results sent in a user message right after the results "
        "(a Chat tool message takes text only)",
        payload_index=len(messages) - 1,
    )
