"""Tool-call blocks and the units budget trimming works in."""

from __future__ import annotations

from store.assembler.tool_blocks import ToolBlock, block_at, tool_blocks, units
from tests.unit.assembler.builders import AC, A, R, T, U


def test_blocks_span_the_call_and_its_results() -> None:
    history = [U(), AC(1, 2), T(1), T(2), A(), AC(3), T(3), R()]
    assert tool_blocks(history) == [ToolBlock(start=1, end=3), ToolBlock(start=5, end=6)]


def test_a_pending_block_is_just_its_call() -> None:
    assert tool_blocks([AC(1), U()]) == [ToolBlock(start=0, end=0)]


def test_block_at() -> None:
    blocks = tool_blocks([U(), AC(1), T(1)])
    assert block_at(blocks, 2) == ToolBlock(start=1, end=2)
    assert block_at(blocks, 0) is None


def test_units_never_split_a_block() -> None:
    assert units([U(), AC(1, 2), T(1), T(2), R()]) == [(0, 0), (1, 3), (4, 4)]
