"""Tool-call blocks in a neutral message list: an assistant message with tool
calls followed by the tool messages answering them.

Placement and budget trimming work in units that never split a block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from store.domain.messages import Message


@dataclass(frozen=True, kw_only=True)
class ToolBlock:
    start: int  # index of the assistant message carrying the calls
    end: int  # index of its last result (== start while no result follows)

    def contains(self, index: int) -> bool:
        return self.start <= index <= self.end


def tool_blocks(messages: Sequence[Message]) -> list[ToolBlock]:
    blocks: list[ToolBlock] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "assistant" and message.tool_calls:
            ids = {call.id for call in message.tool_calls}
            end = i
            while (
                end + 1 < len(messages)
                and messages[end + 1].role == "tool"
                and messages[end + 1].tool_call_id in ids
            ):
                end += 1
            blocks.append(ToolBlock(start=i, end=end))
            i = end + 1
        else:
            i += 1
    return blocks


def block_at(blocks: Sequence[ToolBlock], index: int) -> ToolBlock | None:
    for block in blocks:
        if block.contains(index):
            return block
    return None


def units(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Split into (start, end) spans: one per tool block, one per other message."""
    spans: list[tuple[int, int]] = []
    blocks = {block.start: block for block in tool_blocks(messages)}
    i = 0
    while i < len(messages):
        end = blocks[i].end if i in blocks else i
        spans.append((i, end))
        i = end + 1
    return spans
