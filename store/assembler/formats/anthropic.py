"""Anthropic Messages: `{"system": [blocks], "messages": [...]}` (rules A1-A9).

Messages alternate user/assistant starting with user (a minimal user turn is
added, and listed, when the visible window starts with the assistant). All
results of one tool block go in ONE user message, tool_result blocks first.
Reminders and other mid-conversation system messages become
`<system-reminder>` text blocks in the user turn at their place. Thinking
blocks are replayed first in the assistant content. Prompt-cache
breakpoints go on the system prompt and on the last content block before
the special block (the stable prefix).
"""

from __future__ import annotations

from typing import Any

from store.assembler.diagnostics import Repair, RepairKind
from store.assembler.formats.common import (
    CONTINUATION_TEXT,
    Conversation,
    Rendered,
    reasoning_for,
    system_note_text,
    text_parts,
)
from store.assembler.formats.turns import Block, Turns
from store.assembler.special_block import is_special
from store.messages import ImagePart, Message, TextPart

EPHEMERAL = {"type": "ephemeral"}
THINKING_TYPES = ("thinking", "redacted_thinking")


def _image(part: ImagePart) -> Block:
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
    }


def _user_blocks(message: Message) -> list[Block]:
    content = message.content
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[Block] = []
    for part in content:
        if isinstance(part, TextPart):
            if part.text.strip():
                blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append(_image(part))
    return blocks


def _assistant_blocks(message: Message) -> list[Block]:
    blocks: list[Block] = []
    if message.reasoning:
        for block in reasoning_for(message, "anthropic"):
            if block.redacted and block.data:
                blocks.append({"type": "redacted_thinking", "data": block.data})
            elif block.text and block.signature:
                blocks.append(
                    {"type": "thinking", "thinking": block.text, "signature": block.signature}
                )
    content = message.content
    if isinstance(content, str):
        if content.strip():
            blocks.append({"type": "text", "text": content})
    else:
        blocks.extend({"type": "text", "text": t} for t in text_parts(message))
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def _tool_result(message: Message) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    content = message.content
    text = content if isinstance(content, str) else message.text
    if text:  # an empty result omits content rather than send an empty text block
        block["content"] = text
    if message.is_error:
        block["is_error"] = True
    return block


def _strip_final_assistant(turns: Turns) -> None:
    if not turns.turns or turns.turns[-1]["role"] != "assistant":
        return
    last = turns.turns[-1]["content"][-1]
    if last["type"] == "text" and last["text"] != last["text"].rstrip():
        last["text"] = last["text"].rstrip()
        turns.other_repairs.append(
            Repair(
                kind=RepairKind.STRIPPED_TRAILING_WHITESPACE,
                detail="trailing whitespace removed from the final assistant message",
                payload_index=len(turns.turns) - 1,
            )
        )


def render(conversation: Conversation, *, cache_breakpoints: bool = True) -> Rendered:
    turns = Turns(
        user_role="user",
        content_key="content",
        is_result=lambda b: b["type"] == "tool_result",
        is_thinking=lambda b: b["type"] in THINKING_TYPES,
    )
    before_special: tuple[int, int] | None = None
    seen_special = False
    add = turns.add
    for message in conversation.history:
        if not seen_special and is_special(message):
            seen_special = True
            before_special = turns.last_block()
        role = message.role
        content = message.content
        if content.__class__ is str and role == "user":  # the common cases, inline
            if content.strip():
                add("user", [{"type": "text", "text": content}])
        elif (
            content.__class__ is str
            and role == "assistant"
            and not message.tool_calls
            and not message.reasoning
        ):
            if content.strip():
                add("assistant", [{"type": "text", "text": content}])
        elif role == "assistant":
            add("assistant", _assistant_blocks(message))
        elif role == "tool":
            add("user", [_tool_result(message)])
        elif role == "system":
            add("user", [{"type": "text", "text": system_note_text(message)}])
        else:
            add("user", _user_blocks(message))
    if not seen_special:
        before_special = turns.last_block()
    if turns.ensure_user_first({"type": "text", "text": CONTINUATION_TEXT}) and before_special:
        before_special = (before_special[0] + 1, before_special[1])
    _strip_final_assistant(turns)

    payload: dict[str, Any] = {}
    marks: list[str] = []
    if conversation.system_prompt is not None:
        system_block: Block = {"type": "text", "text": conversation.system_prompt}
        if cache_breakpoints:
            system_block["cache_control"] = dict(EPHEMERAL)
            marks.append("system[0]")
        payload["system"] = [system_block]
    if cache_breakpoints and before_special is not None:
        turn, block = before_special
        turns.turns[turn]["content"][block]["cache_control"] = dict(EPHEMERAL)
        marks.append(f"messages[{turn}].content[{block}]")
    payload["messages"] = turns.turns
    return Rendered(payload=payload, repairs=tuple(turns.repairs), cache_breakpoints=tuple(marks))
