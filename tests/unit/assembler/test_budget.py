"""Token budget trimming: oldest turns first, never part of a block."""

from __future__ import annotations

from store.assembler.budget import trim_to_budget
from store.domain.tokens import approximate_tokens
from tests.unit.assembler.builders import AC, FOUR_SLOTS, A, T, U, build, shape


def test_nothing_dropped_when_it_fits() -> None:
    history = [U(), A()]
    kept, trim = trim_to_budget(history, fixed_tokens=0, budget=1000, count=approximate_tokens)
    assert kept == history
    assert (trim.dropped_messages, trim.over_budget) == (0, False)


def test_a_tool_block_is_dropped_whole() -> None:
    history = [AC(1, 2), T(1, "x" * 200), T(2), U(), A()]
    kept, trim = trim_to_budget(history, fixed_tokens=0, budget=20, count=approximate_tokens)
    assert kept == history[3:]
    assert trim.dropped_messages == 3


def test_the_newest_turn_is_kept_even_over_budget() -> None:
    history = [U("x" * 400), U("y" * 400)]
    kept, trim = trim_to_budget(history, fixed_tokens=0, budget=5, count=approximate_tokens)
    assert kept == history[1:]
    assert trim.over_budget


def test_system_prompt_and_special_block_are_never_dropped() -> None:
    assembly = build([U("x" * 400), A(), U()], slots=FOUR_SLOTS, token_budget=10)
    assert shape(assembly) == ["S", "U", "SP"]
    trim = assembly.diagnostics.dropped_by_budget
    assert trim is not None
    assert trim.over_budget
    assert trim.dropped_messages == 2
