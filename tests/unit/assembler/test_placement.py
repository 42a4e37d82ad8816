"""Placement policies (behaviours §1): every example and rule."""

from __future__ import annotations

import pytest

from store.assembler import PlacementPolicy, special_block_index
from store.domain.context import ContextSlots
from tests.unit.assembler.builders import AC, NO_SYSTEM, A, R, T, U, build, shape


def test_default_policy_with_one_tool_block_goes_before_the_first_block() -> None:
    assembly = build([U(), AC(1), T(1)])
    assert shape(assembly) == ["S", "U", "SP", "A[1]", "T1"]
    assert assembly.diagnostics.special_block.index == 2
    assert assembly.diagnostics.special_block.policy == "after_tool_result"
    assert assembly.diagnostics.special_block.n == 3


def test_default_policy_goes_after_the_third_result_from_the_end() -> None:
    messages = [U(), AC(1), T(1), AC(2), T(2), AC(3), T(3), AC(4), T(4)]
    assert shape(build(messages)) == [
        "S", "U", "A[1]", "T1", "A[2]", "T2", "SP", "A[3]", "T3", "A[4]", "T4",
    ]  # fmt: skip


def test_default_policy_moves_to_the_end_of_a_parallel_block() -> None:
    # The 3rd result from the end is T2, inside block A[2,3,4]: after its last result.
    messages = [U(), AC(1), T(1), AC(2, 3, 4), T(2), T(3), T(4), AC(5), T(5)]
    assert shape(build(messages)) == [
        "S", "U", "A[1]", "T1", "A[2,3,4]", "T2", "T3", "T4", "SP", "A[5]", "T5",
    ]  # fmt: skip


def test_default_policy_without_tool_calls_appends_at_the_end() -> None:
    assert shape(build([U(), A(), U()])) == ["S", "U", "A", "U", "SP"]


def test_default_policy_with_two_results_goes_before_the_first_block() -> None:
    messages = [U(), A(), U(), AC(1), T(1), AC(2), T(2), A()]
    assert shape(build(messages)) == ["S", "U", "A", "U", "SP", "A[1]", "T1", "A[2]", "T2", "A"]


def test_custom_n_for_the_default_policy() -> None:
    messages = [U(), AC(1), T(1), AC(2), T(2)]
    assert shape(build(messages, n=1)) == ["S", "U", "A[1]", "T1", "A[2]", "T2", "SP"]


def test_before_assistant_goes_before_the_third_assistant_from_the_end() -> None:
    messages = [U(), A(), U(), A(), U(), A(), U(), A()]
    assert shape(build(messages, policy="before_assistant")) == [
        "S", "U", "A", "U", "SP", "A", "U", "A", "U", "A",
    ]  # fmt: skip


def test_before_assistant_with_fewer_than_n_goes_before_the_first_assistant() -> None:
    assert shape(build([U(), A(), U()], policy="before_assistant")) == ["S", "U", "SP", "A", "U"]


def test_before_assistant_without_assistant_appends() -> None:
    assert shape(build([U()], policy="before_assistant")) == ["S", "U", "SP"]


def test_from_end_targets_len_minus_n() -> None:
    messages = [U(), A(), U(), A(), U(), A(), U()]
    assert shape(build(messages, policy="from_end")) == [
        "S",
        "U",
        "A",
        "SP",
        "U",
        "A",
        "U",
        "A",
        "U",
    ]


def test_from_end_inside_a_block_moves_to_the_block_start() -> None:
    # 7 messages, target index 2 = T1 inside block A[1,2] (index 1..3).
    messages = [U(), AC(1, 2), T(1), T(2), A(), U(), A()]
    assert shape(build(messages, policy="from_end")) == [
        "S", "U", "SP", "A[1,2]", "T1", "T2", "A", "U", "A",
    ]  # fmt: skip


def test_from_end_with_a_history_shorter_than_n_appends() -> None:
    assert shape(build([U(), A()], policy="from_end")) == ["S", "U", "A", "SP"]


def test_from_end_with_exactly_n_goes_first_after_the_system_message() -> None:
    messages = [U(), A(), U(), A(), U()]
    assert shape(build(messages, policy="from_end")) == ["S", "SP", "U", "A", "U", "A", "U"]


def test_after_system_and_tail() -> None:
    messages = [U(), AC(1), T(1)]
    assert shape(build(messages, policy="after_system")) == ["S", "SP", "U", "A[1]", "T1"]
    assert shape(build(messages, policy="tail")) == ["S", "U", "A[1]", "T1", "SP"]


def test_without_a_system_message_the_block_may_go_at_index_zero() -> None:
    assembly = build([U(), AC(1), T(1)], profile=NO_SYSTEM, policy="after_system")
    assert shape(assembly) == ["SP", "U", "A[1]", "T1"]
    assert assembly.diagnostics.special_block.index == 0


@pytest.mark.parametrize("policy", list(PlacementPolicy))
def test_no_policy_places_the_block_before_the_system_message(policy: PlacementPolicy) -> None:
    for messages in ([], [U()], [AC(1), T(1)], [U(), AC(1), T(1), A()]):
        assembly = build(messages, policy=policy, n=1)
        assert shape(assembly)[0] == "S"


@pytest.mark.parametrize("policy", list(PlacementPolicy))
def test_no_policy_ever_splits_a_tool_block(policy: PlacementPolicy) -> None:
    messages = [U(), AC(1, 2, 3), T(1), T(2), T(3), AC(4, 5), T(4), T(5), U(), A()]
    for n in range(1, 12):
        placed = shape(build(messages, policy=policy, n=n))
        at = placed.index("SP")
        assert not any(after.startswith("T") for after in placed[at + 1 : at + 2])


def test_empty_slots_insert_nothing() -> None:
    assembly = build([U(), AC(1), T(1)], slots=ContextSlots())
    assert "SP" not in shape(assembly)
    assert assembly.diagnostics.special_block.index is None
    assert assembly.diagnostics.special_block.count == 0


def test_counting_happens_on_the_window_after_budget_trimming() -> None:
    long = "x" * 400
    messages = [U(long), AC(1), T(1, long), AC(2), T(2, long), AC(3), T(3), AC(4), T(4)]
    full = shape(build(messages))
    assert full.index("SP") == 6  # after T2
    trimmed = build(messages, token_budget=120)
    assert trimmed.diagnostics.dropped_by_budget is not None
    assert trimmed.diagnostics.dropped_by_budget.dropped_messages == 5
    # Visible now: A[3] T3 A[4] T4 — fewer than 3 results → before the first block.
    assert shape(trimmed) == ["S", "SP", "A[3]", "T3", "A[4]", "T4"]


def test_reminders_count_as_messages_for_from_end() -> None:
    messages = [U(), A(), R(), U(), A(), R()]
    assert shape(build(messages, policy="from_end")) == ["S", "U", "SP", "A", "R", "U", "A", "R"]


def test_special_block_index_on_an_empty_history() -> None:
    for policy in PlacementPolicy:
        assert special_block_index([], policy=policy, n=3) == 0


def test_distance_from_end_is_reported() -> None:
    messages = [U(), AC(1), T(1), AC(2), T(2), AC(3), T(3), AC(4), T(4)]
    assert build(messages).diagnostics.special_block.distance_from_end == 4
