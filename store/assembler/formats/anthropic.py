"""Anthropic Messages: `{"system": [blocks], "messages": [...]}` (rules A1-A9).

Messages alternate user/assistant starting with user (a minimal user turn is
added, and listed, when the visible window starts with the assistant). All
results of one tool block go in ONE user message, tool_result blocks first.
Reminders and other mid-conversation system messages become
`<system-reminder>` text blocks in the user turn at their place. Thinking
blocks are replayed first in the assistant content, and only with
something else to send (an assistant turn of thinking alone is not sent).
Tool ids outside `^[a-zA-Z0-9_-]+$` are renamed (`tool_ids`); a result that
is only whitespace is sent without content (Anthropic refuses blank text).
Prompt-cache breakpoints go on the system prompt and on the last content
block before the special block (the stable prefix), never on a thinking
block (Anthropic refuses `cache_control` there): the nearest earlier block
that takes one.
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
from store.assembler.special_block import SPECIAL_SLOT
from store.assembler.tool_ids import ANTHROPIC, provider_ids
from store.assembler.tool_images import result_images
from store.domain.messages import ImagePart, Message, TextPart

EPHEMERAL = {"type": "ephemeral"}
THINKING_TYPES = ("thinking", "redacted_thinking")


def _image(part: ImagePart) -> Block:
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
    }


def user_blocks(message: Message) -> list[Block]:
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


def _assistant_blocks(message: Message, ids: dict[str, str]) -> list[Block]:
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
            {
                "type": "tool_use",
                "id": ids.get(call.id, call.id),
                "name": call.name,
                "input": call.arguments,
            }
        )
    if blocks and blocks[-1]["type"] in THINKING_TYPES:
        return []  # thinking alone: nothing for it to go with
    return blocks


def _tool_result(message: Message, ids: dict[str, str]) -> tuple[Block, bool]:
    """The block, and whether a whitespace-only text was left out."""
    call_id = message.tool_call_id or ""
    content = message.content
    text = content if isinstance(content, str) else message.text
    block, blank = tool_result_block(ids.get(call_id, call_id), text, is_error=message.is_error)
    images = result_images(message)
    if images:
        # A tool_result's content may be text and image blocks (images from tools).
        texts: list[Block] = [{"type": "text", "text": text}] if text.strip() else []
        block["content"] = [*texts, *(_image(image) for image in images)]
        blank = False
    return block, blank


def tool_result_block(call_id: str, text: str, *, is_error: bool) -> tuple[Block, bool]:
    """A result's block, and whether a whitespace-only text was left out."""
    block: Block = {"type": "tool_result", "tool_use_id": call_id}
    # An empty or blank result omits content: Anthropic refuses blank text.
    blank = False
    if text.strip():
        block["content"] = text
    elif text:
        blank = True
    if is_error:
        block["is_error"] = True
    return block, blank


def blank_result(turns: Turns, call_id: str | None) -> None:
    """List the result just added, whitespace only, as sent without content."""
    turns.other_repairs.append(
        Repair(
            kind=RepairKind.DROPPED_EMPTY_TEXT,
            detail=f"whitespace-only result of {call_id!r} sent without content",
            payload_index=len(turns.turns) - 1,
        )
    )


def _cacheable(turns: list[dict[str, Any]], at: tuple[int, int]) -> tuple[int, int] | None:
    """`at`, or the nearest block before it that takes a cache_control mark."""
    turn, block = at
    while turn >= 0:
        content = turns[turn]["content"]
        for k in range(min(block, len(content) - 1), -1, -1):
            if content[k]["type"] not in THINKING_TYPES:
                return turn, k
        turn -= 1
        block = len(turns[turn]["content"]) - 1 if turn >= 0 else -1
    return None


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
    turns = Turns(user_role="user", content_key="content")
    before_special: tuple[int, int] | None = None
    seen_special = False
    add = turns.add
    ids, renamed = provider_ids(conversation.history, ANTHROPIC)
    for message in conversation.history:
        if not seen_special and SPECIAL_SLOT in message.metadata:  # is_special, inline
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
            blocks = _assistant_blocks(message, ids)
            thinking = sum(b["type"] in THINKING_TYPES for b in blocks) if message.reasoning else 0
            add("assistant", blocks, thinking)  # thinking blocks come first
        elif role == "tool":
            block, blank = _tool_result(message, ids)
            add("user", [block], 1)
            if blank:
                blank_result(turns, message.tool_call_id)
        elif role == "system":
            add("user", [{"type": "text", "text": system_note_text(message)}])
        else:
            add("user", user_blocks(message))
    if not seen_special:
        before_special = turns.last_block()
    return finish(
        turns,
        before_special,
        conversation.system_prompt,
        cache_breakpoints=cache_breakpoints,
        renamed=renamed,
    )


def finish(
    turns: Turns,
    before_special: tuple[int, int] | None,
    system_prompt: str | None,
    *,
    cache_breakpoints: bool,
    renamed: list[Repair],
) -> Rendered:
    """The payload from the history's turns (`before_special`: the last
    block before the special block, or of the history when it has none):
    a user turn first, the final assistant text stripped, the system
    prompt, the prompt-cache marks."""
    if turns.ensure_user_first({"type": "text", "text": CONTINUATION_TEXT}) and before_special:
        before_special = (before_special[0] + 1, before_special[1])
    _strip_final_assistant(turns)

    payload: dict[str, Any] = {}
    marks: list[str] = []
    if system_prompt is not None:
        system_block: Block = {"type": "text", "text": system_prompt}
        if cache_breakpoints:
            system_block["cache_control"] = dict(EPHEMERAL)
            marks.append("system[0]")
        payload["system"] = [system_block]
    target = _cacheable(turns.turns, before_special) if before_special is not None else None
    if cache_breakpoints and target is not None:
        turn, index = target
        turns.turns[turn]["content"][index]["cache_control"] = dict(EPHEMERAL)
        marks.append(f"messages[{turn}].content[{index}]")
    payload["messages"] = turns.turns
    return Rendered(
        payload=payload,
        repairs=(*renamed, *turns.repairs),
        cache_breakpoints=tuple(marks),
    )
