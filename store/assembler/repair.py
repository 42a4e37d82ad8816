"""Making a visible window well-formed before placement (behaviours §3, §6).

Always: every tool block is made contiguous: its results are pulled up to
follow the call, and anything recorded between a call and its result (a
reminder, a user message) is rendered after the block, never inside it.

With `repair` on (the default), also: a call with no result gets a
synthesized result saying the call was interrupted; a result with no earlier
call, or a second result for the same call, is dropped; whitespace-only text
parts are dropped; an assistant message with neither text nor tool calls
(only images, which no format sends for the assistant) is dropped. Every
change is listed as a `Repair`; `message_index` is the index in the agent's
visible window as passed to `assemble`.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.diagnostics import Repair, RepairKind
from store.domain.messages import Message, MessageKind, TextPart

INTERRUPTED_RESULT = "[tool call interrupted: no result was recorded for this call]"
SYNTHESIZED = "synthesized"


def placeholder_result(call_id: str, agent_id: str) -> Message:
    return Message(
        role="tool",
        tool_call_id=call_id,
        content=INTERRUPTED_RESULT,
        is_error=True,
        agent_id=agent_id,
        kind=MessageKind.OUTPUT,
        metadata={SYNTHESIZED: True},
    )


def _result_content(message: Message) -> Message:
    """A result made of parts as the formats take it: text alone joined into
    one string; with images, its non-blank text parts and its images (each
    format sends them its own way: `store.assembler.tool_images`)."""
    if isinstance(message.content, str):
        return message
    if all(isinstance(p, TextPart) for p in message.content):
        return message.model_copy(update={"content": message.text})
    kept = tuple(p for p in message.content if not (isinstance(p, TextPart) and not p.text.strip()))
    return message.model_copy(update={"content": kept})


def _drop_empty_text(message: Message, index: int, repairs: list[Repair]) -> Message:
    if isinstance(message.content, str):
        return message
    kept = tuple(p for p in message.content if not (isinstance(p, TextPart) and not p.text.strip()))
    if len(kept) == len(message.content):
        return message
    repairs.append(
        Repair(
            kind=RepairKind.DROPPED_EMPTY_TEXT,
            detail=f"{len(message.content) - len(kept)} empty text part(s) dropped",
            message_index=index,
        )
    )
    return message.model_copy(update={"content": kept if kept else ""})


# How far past a call its results are looked for before the search is narrowed
# to the calls some later result can still answer.
_NEARBY = 8


def _last_result_positions(messages: Sequence[Message]) -> dict[str | None, int]:
    return {m.tool_call_id: j for j, m in enumerate(messages) if m.role == "tool"}


def normalise_window(
    messages: Sequence[Message], *, repair: bool
) -> tuple[list[Message], list[Repair]]:
    """Contiguous tool blocks (+ repairs when asked); returns the new list and repairs."""
    repairs: list[Repair] = []
    out: list[Message] = []
    append = out.append
    consumed: set[int] = set()  # results already placed after their call
    answered: set[str] = set()
    last_result_at: dict[str | None, int] | None = None
    size = len(messages)
    for i, message in enumerate(messages):
        role = message.role
        if role == "tool":
            if i in consumed:
                continue
            call_id = message.tool_call_id or ""
            kind = (
                RepairKind.DROPPED_DUPLICATE_TOOL_RESULT
                if call_id in answered
                else RepairKind.DROPPED_ORPHAN_TOOL_RESULT
            )
            if repair:
                repairs.append(
                    Repair(kind=kind, detail=f"tool result for {call_id!r}", message_index=i)
                )
                continue
            append(_result_content(message))
            continue
        if repair and not isinstance(message.content, str):
            if role == "assistant" and not message.tool_calls and not message.text.strip():
                # Only images: no format sends an assistant's images, so nothing
                # would be left (and its reasoning would have nothing to go on).
                repairs.append(
                    Repair(
                        kind=RepairKind.DROPPED_EMPTY_ASSISTANT_MESSAGE,
                        detail="assistant message without text or tool calls (only images, "
                        "which no format sends for the assistant) dropped with its reasoning",
                        message_index=i,
                    )
                )
                continue
            append(_drop_empty_text(message, i, repairs))
        else:
            append(message)
        calls = message.tool_calls
        if role != "assistant" or not calls:
            continue
        if len(calls) == 1 and i + 1 < size:
            # The usual block, one call and its result right after it: what
            # the search below finds, without its sets.
            later = messages[i + 1]
            call_id = calls[0].id
            if later.role == "tool" and later.tool_call_id == call_id and i + 1 not in consumed:
                consumed.add(i + 1)
                answered.add(call_id)
                append(later if later.content.__class__ is str else _result_content(later))
                continue
        ids = {call.id for call in calls}
        waiting = set(ids)
        # The calls still looked for: once the search goes past the call's
        # neighbourhood, only those a later result answers (without this, every
        # unanswered call would search to the end of the window).
        findable = waiting
        skipped: list[int] = []
        last_result = i
        for j in range(i + 1, size):
            if j == i + _NEARBY and findable:
                if last_result_at is None:
                    last_result_at = _last_result_positions(messages)
                findable = {c for c in findable if last_result_at.get(c, -1) >= j}
            if not findable:
                break
            later = messages[j]
            if j in consumed:
                continue
            if later.role == "tool" and later.tool_call_id in findable:
                waiting.discard(later.tool_call_id)
                findable.discard(later.tool_call_id)
                consumed.add(j)
                last_result = j
                append(later if later.content.__class__ is str else _result_content(later))
            else:
                skipped.append(j)
        moved = sum(j < last_result for j in skipped) if skipped else 0
        if moved:
            repairs.append(
                Repair(
                    kind=RepairKind.MOVED_OUT_OF_TOOL_BLOCK,
                    detail=f"{moved} message(s) recorded inside the tool block moved after it",
                    message_index=i,
                )
            )
        answered |= ids
        if repair and waiting:
            for call in message.tool_calls:
                if call.id in waiting:
                    append(placeholder_result(call.id, message.agent_id))
                    repairs.append(
                        Repair(
                            kind=RepairKind.SYNTHESIZED_TOOL_RESULT,
                            detail=f"call {call.id!r} ({call.name}) had no result",
                            message_index=i,
                        )
                    )
    return out, repairs
