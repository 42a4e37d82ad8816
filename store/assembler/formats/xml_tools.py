"""The Sentra XML tool protocol, for models without native function calling
(docs/behaviours.md §5): `{"messages": [...]}` in OpenAI Chat shape with
no `tool_calls` and no `tool` role.

Each tool round (an assistant message with calls + their results) becomes
ONE assistant message: its text, the `<sentra-tools>` call XML, a blank
line, then one `<sentra-result>` per result (images returned by tools
follow the round in a user message). `step` numbers every call of
the conversation from 0. Mid-conversation system messages become
`<system-reminder>` user text. Consecutive same-role messages are merged so
user and assistant alternate, and the final instruction is folded into the
last user message — never two user messages in a row.

The user's objective — the last message a person typed — is sent wrapped
as the protocol marks it (`<sentra-user-question><objective>…</objective>
</sentra-user-question>`), so the model tells the question from the tool
results around it; `options.xml_user_question=False` sends it bare.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.assembler.diagnostics import Repair, RepairKind
from store.assembler.formats.common import (
    Conversation,
    Rendered,
    image_url,
    system_note_text,
    text_parts,
)
from store.assembler.formats.openai_chat import user_content
from store.assembler.formats.xml_parser import parse_tool_calls
from store.assembler.formats.xml_values import escape_attribute, escape_text, render_json
from store.assembler.formats.xml_values import render_parameter as _parameter
from store.assembler.special_block import SPECIAL_SLOT
from store.assembler.tool_images import images_note, result_images
from store.domain.messages import Message, MessageKind, ToolCall

__all__ = ["parse_tool_calls", "render", "render_result", "render_tool_calls"]


def render_tool_calls(calls: Sequence[ToolCall]) -> str:
    lines = ["<sentra-tools>"]
    for call in calls:
        lines.append(f'  <invoke name="{escape_attribute(call.name)}">')
        lines.extend(f"    {_parameter(name, value)}" for name, value in call.arguments.items())
        lines.append("  </invoke>")
    lines.append("</sentra-tools>")
    return "\n".join(lines)


def render_result(*, step: int, call: ToolCall, result: Message) -> str:
    success = "false" if result.is_error else "true"
    reason = str(result.metadata.get("reason", ""))
    return "\n".join(
        [
            f'<sentra-result step="{step}" tool="{escape_attribute(call.name)}" '
            f'success="{success}">',
            f"  <reason>{escape_text(reason)}</reason>",
            f"  <arguments>{render_json(call.arguments)}</arguments>",
            f"  <data>{escape_text(result.text)}</data>",
            "</sentra-result>",
        ]
    )


def user_question(text: str) -> str:
    """The user's objective as the protocol marks it."""
    return (
        "<sentra-user-question>\n"
        f"  <objective>{escape_text(text)}</objective>\n"
        "</sentra-user-question>"
    )


def _objective_index(history: Sequence[Message]) -> int | None:
    """The last message a person typed (not the special block's), if any."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if (
            message.role == "user"
            and message.kind is MessageKind.INPUT
            and SPECIAL_SLOT not in message.metadata
            and not message.is_empty
        ):
            return index
    return None


def _wrapped(message: Message) -> Any:
    """The objective's content, its text wrapped, its images after it."""
    question = user_question("\n".join(text_parts(message)))
    parts = user_content(message)
    if isinstance(parts, str):
        return question
    images = [p for p in parts if p["type"] == "image_url"]
    return [{"type": "text", "text": question}, *images] if images else question


def _join(first: Any, second: Any) -> Any:
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"

    def parts(content: Any) -> list[Any]:
        return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)

    return parts(first) + parts(second)


def _join_all(pieces: Sequence[Any]) -> Any:
    """What joining the pieces pairwise, left to right, with `_join` gives, in
    time linear in their size."""
    strings = 0
    while strings < len(pieces) and isinstance(pieces[strings], str):
        strings += 1
    if strings == len(pieces):
        return "\n\n".join(pieces)
    joined: list[Any] = [{"type": "text", "text": "\n\n".join(pieces[:strings])}] if strings else []
    for piece in pieces[strings:]:
        if isinstance(piece, str):
            joined.append({"type": "text", "text": piece})
        else:
            joined.extend(piece)
    return joined


class _Chat:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.merged: dict[int, int] = {}  # message index -> pieces merged into it
        # The pieces merged into the last message, joined to it once it is
        # complete (joining them two by two copied its growing text each time).
        self._more: list[Any] = []

    def add(self, role: str, content: Any) -> None:
        messages = self.messages
        if messages and messages[-1]["role"] == role and role != "system":
            self._more.append(content)
            index = len(messages) - 1
            self.merged[index] = self.merged.get(index, 0) + 1
            return
        if self._more:
            self._join_last()
        messages.append({"role": role, "content": content})

    def _join_last(self) -> None:
        last = self.messages[-1]
        last["content"] = _join_all([last["content"], *self._more])
        self._more = []

    def finish(self) -> list[dict[str, Any]]:
        """The messages, every merged one joined."""
        if self._more:
            self._join_last()
        return self.messages

    def repairs(self) -> tuple[Repair, ...]:
        return tuple(
            Repair(
                kind=RepairKind.MERGED_FOR_ALTERNATION,
                detail=f"{count + 1} consecutive {self.messages[index]['role']} pieces "
                "merged into one message",
                payload_index=index,
            )
            for index, count in sorted(self.merged.items())
        )


def _tool_round(
    history: Sequence[Message], start: int, step: int, images: list[dict[str, Any]]
) -> tuple[str, int, int]:
    """(assistant text of the round, index after it, next step); the
    results' images from tools are added to `images`."""
    message = history[start]
    calls = {call.id: call for call in message.tool_calls}
    steps = {call.id: step + k for k, call in enumerate(message.tool_calls)}
    end = start + 1
    results: list[str] = []
    while end < len(history) and history[end].role == "tool":
        call_id = history[end].tool_call_id or ""
        if call_id not in calls:
            break
        results.append(render_result(step=steps[call_id], call=calls[call_id], result=history[end]))
        found = result_images(history[end])
        if found:
            images.append({"type": "text", "text": images_note(call_id)})
            images.extend({"type": "image_url", "image_url": {"url": image_url(i)}} for i in found)
        end += 1
    pieces = [*text_parts(message), render_tool_calls(message.tool_calls)]
    text = "\n\n".join(pieces)
    if results:
        text += "\n\n" + "\n".join(results)
    return text, end, step + len(message.tool_calls)


def render(
    conversation: Conversation, *, final_instruction: str | None, user_question: bool = True
) -> Rendered:
    chat = _Chat()
    if conversation.system_prompt is not None:
        chat.add("system", conversation.system_prompt)
    history = conversation.history
    step = 0
    i = 0
    add = chat.add
    end = len(history)
    objective = _objective_index(history) if user_question else None
    while i < end:
        message = history[i]
        role = message.role
        if role == "assistant" and message.tool_calls:
            images: list[dict[str, Any]] = []
            text, i, step = _tool_round(history, i, step, images)
            add("assistant", text)
            if images:  # the protocol's results are text: the images follow
                add("user", images)
            continue
        if role == "tool":
            # Only reachable with repair off: a result whose call is not visible.
            orphan = ToolCall(id=message.tool_call_id or "unknown", name="unknown")
            add("assistant", render_result(step=step, call=orphan, result=message))
            step += 1
        elif role == "assistant":
            add("assistant", "\n".join(text_parts(message)))
        elif role == "system":
            add("user", system_note_text(message))
        elif i == objective:
            add("user", _wrapped(message))
        else:
            content = message.content
            add("user", content if isinstance(content, str) else user_content(message))
        i += 1
    messages = chat.finish()
    if final_instruction:
        # Folded in, so the task and the instruction read as one request (docs/behaviours.md §5).
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"] = _join(messages[-1]["content"], final_instruction)
        else:
            messages.append({"role": "user", "content": final_instruction})
    return Rendered(payload={"messages": messages}, repairs=chat.repairs())
