"""Tool-result clipping: a tool result longer than its limit is sent as its
head and its tail with a marker saying how much was cut between them.

A tool that prints 200,000 characters (a log, a page, a directory listing)
would otherwise fill the window, and the token budget could only drop its
whole block. Clipping works on the payload only: the stored result is
unchanged, and a later build with a larger limit sends more of it.

Rules (docs/assembler.md, "Tool-result clipping"):
- the limit is `max_tool_result_chars`, or the per-tool override for the
  tool that produced the result (`max_tool_result_chars_by_tool`, by the
  call's name);
- a clipped result is at most its limit in characters, marker included;
  the head gets the larger half of what is kept (what a tool prints first —
  a command line, a header, the first error — usually says most), the tail
  the rest (the last lines: a summary, an exit status);
- only text is cut: an image part of a result is never cut or dropped here,
  and the result stays one message answering its call, so no tool block is
  split; a parts result is cut across its text parts, in order, with the
  marker where the cut is;
- clipping runs before the token budget: the budget sees clipped results
  and drops whole turns only if the clipped window still does not fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from store.assembler.diagnostics import ToolResultClipping
from store.domain.messages import ContentPart, Message, TextPart


def marker(cut: int) -> str:
    """The text put where characters were cut."""
    return f"\n[… {cut:,} characters cut from this tool result …]\n"


def limits_for(
    history: Sequence[Message], default: int | None, by_tool: Mapping[str, int]
) -> dict[str, int]:
    """Each tool result's limit in `history`, by the call id it answers;
    a result with no limit is absent."""
    limits: dict[str, int] = {}
    for message in history:
        for call in message.tool_calls:
            limit = by_tool.get(call.name, default)
            if limit is not None:
                limits[call.id] = limit
    if default is not None:
        # A result whose call is out of sight (repair off) keeps the default.
        for message in history:
            if message.role == "tool" and message.tool_call_id not in limits:
                limits[message.tool_call_id or ""] = default
    return limits


def clip_text(text: str, limit: int) -> tuple[str, int]:
    """`text` clipped to at most `limit` characters, and how many were cut."""
    if len(text) <= limit:
        return text, 0
    head, tail, cut = _spans(len(text), limit)
    return text[:head] + marker(cut) + (text[-tail:] if tail else ""), cut


def _spans(total: int, limit: int) -> tuple[int, int, int]:
    """(head, tail, cut) for a text of `total` characters clipped to `limit`.
    The marker's length depends on the cut's digits, so settle it twice."""
    cut = total - limit
    for _ in range(3):
        kept = max(limit - len(marker(cut)), 0)
        cut = total - kept
    tail = kept // 2
    return kept - tail, tail, cut


def clip_parts(parts: Sequence[ContentPart], limit: int) -> tuple[tuple[ContentPart, ...], int]:
    """A parts result with its text parts clipped as one text (in order),
    images kept in their places; how many characters were cut."""
    total = sum(len(p.text) for p in parts if isinstance(p, TextPart))
    if total <= limit:
        return tuple(parts), 0
    head, tail, cut = _spans(total, limit)
    tail_from = total - tail
    out: list[ContentPart] = []
    offset = 0
    marked = False
    for part in parts:
        if not isinstance(part, TextPart):
            out.append(part)
            continue
        text = part.text
        start, end = offset, offset + len(text)
        offset = end
        # head <= tail_from, so the head piece never overlaps the tail piece.
        piece = text[: min(max(head - start, 0), len(text))]
        if not marked and end > head:
            piece += marker(cut)
            marked = True
        piece += text[min(max(tail_from - start, 0), len(text)) :]
        if piece:
            out.append(TextPart(text=piece))
    return tuple(out), cut


def clip_tool_results(
    history: Sequence[Message], default: int | None, by_tool: Mapping[str, int]
) -> tuple[list[Message], ToolResultClipping | None]:
    """`history` with each tool result over its limit clipped, and what was
    clipped (None when no limit is set)."""
    if default is None and not by_tool:
        return list(history), None
    limits = limits_for(history, default, by_tool)
    out: list[Message] = []
    clipped: list[str] = []
    cut_total = 0
    for message in history:
        limit = limits.get(message.tool_call_id or "") if message.role == "tool" else None
        if limit is None:
            out.append(message)
            continue
        content = message.content
        if isinstance(content, str):
            new_text, cut = clip_text(content, limit)
            clipped_message = message.model_copy(update={"content": new_text}) if cut else message
        else:
            new_parts, cut = clip_parts(content, limit)
            clipped_message = message.model_copy(update={"content": new_parts}) if cut else message
        if cut:
            clipped.append(message.tool_call_id or "")
            cut_total += cut
        out.append(clipped_message)
    return out, ToolResultClipping(
        clipped=len(clipped), cut_chars=cut_total, call_ids=tuple(clipped)
    )
