"""Where the special block goes (docs/behaviours.md §1).

`special_block_index` works on the history the provider will see (the
visible window after repair and budget trimming, system prompt excluded) and
returns an insertion index into it; the caller adds one for the system
prompt. No policy ever returns an index inside a tool-call block.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.options import PlacementPolicy
from store.assembler.tool_blocks import block_at, tool_blocks
from store.domain.messages import Message


def _block_around(history: Sequence[Message], index: int) -> tuple[int, int] | None:
    """(start, end) of the tool block containing `index`, like
    `block_at(tool_blocks(history), index)` but looking only near `index`.

    A block is an assistant message with calls followed by the results
    answering them, and only such an assistant message starts one; so the
    block holding a result starts at the nearest message before it that is
    not a tool result, and holds it only if every result in between (and the
    result itself) answers one of that message's calls.
    """
    if not 0 <= index < len(history):
        return None
    start = index
    while start >= 0 and history[start].role == "tool":
        start -= 1
    if start < 0:
        return None
    opener = history[start]
    if opener.role != "assistant" or not opener.tool_calls:
        return None
    ids = {call.id for call in opener.tool_calls}
    end = start
    size = len(history)
    while (
        end + 1 < size and history[end + 1].role == "tool" and history[end + 1].tool_call_id in ids
    ):
        end += 1
    return (start, end) if index <= end else None


def _after_tool_result(history: Sequence[Message], n: int) -> int:
    # Seed 001's final requirement: right after the n-th tool result from the
    # end, moved to the end of its block so the block stays whole.
    if n < 1:
        return _after_tool_result_by_lists(history, n)
    seen = 0
    for target in range(len(history) - 1, -1, -1):
        if history[target].role == "tool":
            seen += 1
            if seen == n:
                block = _block_around(history, target)
                return (block[1] if block else target) + 1
    for i, message in enumerate(history):  # the first block's start
        if message.role == "assistant" and message.tool_calls:
            return i
    return len(history)


def _before_assistant(history: Sequence[Message], n: int) -> int:
    # An assistant message is never inside a block (it starts one, or stands
    # alone), so "just before it" is always safe.
    if n < 1:
        return _before_assistant_by_lists(history, n)
    seen = 0
    first: int | None = None
    for i in range(len(history) - 1, -1, -1):
        if history[i].role == "assistant":
            seen += 1
            first = i
            if seen == n:
                return i
    return first if first is not None else len(history)


def _from_end(history: Sequence[Message], n: int) -> int:
    # Seed 000: target = len - n; inside a block → the block's start.
    if len(history) < n:
        return len(history)
    target = len(history) - n
    block = _block_around(history, target)
    return block[0] if block else target


def _after_tool_result_by_lists(history: Sequence[Message], n: int) -> int:
    # The plain form of `_after_tool_result`, kept for an n below 1 (counted
    # from the start by Python's indexing).
    blocks = tool_blocks(history)
    results = [i for i, message in enumerate(history) if message.role == "tool"]
    if len(results) >= n:
        target = results[-n]
        block = block_at(blocks, target)
        return (block.end if block else target) + 1
    if blocks:
        return blocks[0].start
    return len(history)


def _before_assistant_by_lists(history: Sequence[Message], n: int) -> int:
    assistants = [i for i, message in enumerate(history) if message.role == "assistant"]
    if len(assistants) >= n:
        return assistants[-n]
    if assistants:
        return assistants[0]
    return len(history)


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
