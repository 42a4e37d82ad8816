"""Where the special block goes (behaviours §1, seeds 000 and 001).

`special_block_index` works on the history the provider will see (the
visible window after repair and budget trimming, system prompt excluded) and
returns an insertion index into it; the caller adds one for the system
prompt. No policy ever returns an index inside a tool-call block.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.options import PlacementPolicy
from store.assembler.tool_blocks import block_at, tool_blocks
from store.messages import Message


def _after_tool_result(history: Sequence[Message], n: int) -> int:
    # Seed 001's final requirement: right after the n-th tool result from the
    # end, moved to the end of its block so the block stays whole.
    blocks = tool_blocks(history)
    results = [i for i, message in enumerate(history) if message.role == "tool"]
    if len(results) >= n:
        target = results[-n]
        block = block_at(blocks, target)
        return (block.end if block else target) + 1
    if blocks:
        return blocks[0].start
    return len(history)


def _before_assistant(history: Sequence[Message], n: int) -> int:
    # An assistant message is never inside a block (it starts one, or stands
    # alone), so "just before it" is always safe.
    assistants = [i for i, message in enumerate(history) if message.role == "assistant"]
    if len(assistants) >= n:
        return assistants[-n]
    if assistants:
        return assistants[0]
    return len(history)


def _from_end(history: Sequence[Message], n: int) -> int:
    # Seed 000: target = len - n; inside a block → the block's start.
    if len(history) < n:
        return len(history)
    target = len(history) - n
    block = block_at(tool_blocks(history), target)
    return block.start if block else target


def special_block_index(history: Sequence[Message], *, policy: PlacementPolicy, n: int) -> int:
    """Insertion index of the special block in `history` (system prompt excluded)."""
    if policy is PlacementPolicy.AFTER_TOOL_RESULT:
        return _after_tool_result(history, n)
    if policy is PlacementPolicy.BEFORE_ASSISTANT:
        return _before_assistant(history, n)
    if policy is PlacementPolicy.FROM_END:
        return _from_end(history, n)
    if policy is PlacementPolicy.AFTER_SYSTEM:
        return 0
    return len(history)
