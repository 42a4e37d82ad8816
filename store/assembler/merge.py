"""The optional `merge_same_role` pass (behaviours §5, seed 003).

Adjacent messages of the same role are joined with "\\n" into one; empty
text is dropped. Unlike the source, a message carrying tool calls or a tool
result is never merged away: tool messages never merge, a message with
calls only ever absorbs the text before it, and reasoning is kept. The
special block is never joined to the messages around it, so the stable
prefix before it stays byte-identical from one build to the next.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.diagnostics import Repair, RepairKind
from store.assembler.special_block import is_special
from store.messages import Content, ContentPart, Message, TextPart


def _parts(content: Content) -> tuple[ContentPart, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),) if content.strip() else ()
    return tuple(p for p in content if not (isinstance(p, TextPart) and not p.text.strip()))


def _join(first: Content, second: Content) -> Content:
    if isinstance(first, str) and isinstance(second, str):
        return "\n".join(text for text in (first, second) if text.strip())
    return _parts(first) + _parts(second)


def _can_merge(previous: Message, message: Message) -> bool:
    return (
        previous.role == message.role
        and message.role != "tool"
        and not previous.tool_calls
        and previous.kind == message.kind
        and is_special(previous) == is_special(message)
    )


def merge_same_role(history: Sequence[Message]) -> tuple[list[Message], list[Repair]]:
    out: list[Message] = []
    repairs: list[Repair] = []
    for message in history:
        if out and _can_merge(out[-1], message):
            previous = out[-1]
            out[-1] = previous.model_copy(
                update={
                    "content": _join(previous.content, message.content),
                    "tool_calls": message.tool_calls,
                    "reasoning": previous.reasoning + message.reasoning,
                }
            )
            repairs.append(
                Repair(
                    kind=RepairKind.MERGED_SAME_ROLE,
                    detail=f"adjacent {message.role} messages joined (at {len(out) - 1})",
                )
            )
        else:
            out.append(message)
    return out, repairs
