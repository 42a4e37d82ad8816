"""Batch operations as pure functions: examples and general properties.

What the operation values refuse on their own is tested in test_operations."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.domain import window as win
from store.domain.errors import BoundaryError, InvalidOperation
from store.domain.messages import Role
from store.domain.operations import Clear, Filter, SelectionOperation, StartBatch, Truncate
from store.domain.window import WindowEntry


def entry(
    seq: int, role: Role, text: str = "", calls: tuple[str, ...] = (), answers: str | None = None
) -> WindowEntry:
    return WindowEntry(
        seq=seq,
        sort_key=Decimal(seq),
        role=role,
        agent_id="main",
        text=text,
        call_ids=calls,
        answers=answers,
    )


# S, U, A[1], T1, U, A
WINDOW = [
    entry(1, "system", "rules"),
    entry(2, "user", "hello world"),
    entry(3, "assistant", "", calls=("c1",)),
    entry(4, "tool", "result", answers="c1"),
    entry(5, "user", "more please"),
    entry(6, "assistant", "done"),
]


def seqs(entries: list[WindowEntry]) -> list[int]:
    return [e.seq for e in entries]


def test_keep_last_keeps_the_tail() -> None:
    assert seqs(win.truncate(WINDOW, Truncate(keep_last=2))) == [5, 6]
    assert seqs(win.truncate(WINDOW, Truncate(keep_last=0))) == []
    assert seqs(win.truncate(WINDOW, Truncate(keep_last=99))) == [1, 2, 3, 4, 5, 6]


def test_truncate_forms() -> None:
    assert seqs(win.truncate(WINDOW, Truncate(keep_first=2))) == [1, 2]
    assert seqs(win.truncate(WINDOW, Truncate(remove_first=4))) == [5, 6]
    assert seqs(win.truncate(WINDOW, Truncate(remove_last=4))) == [1, 2]
    assert seqs(win.truncate(WINDOW, Truncate(remove_first=1, remove_last=2))) == [2, 3, 4]
    assert seqs(win.truncate(WINDOW, Truncate(remove_first=4, remove_last=4))) == []
    assert seqs(win.truncate(WINDOW, Truncate(range=(1, 3)))) == [2, 3]
    assert seqs(win.truncate(WINDOW, Truncate(range=(2, 2)))) == []
    assert seqs(win.truncate(WINDOW, Truncate(range=(4, 99)))) == [5, 6]


def test_role_restricted_truncate_leaves_other_roles_alone() -> None:
    assert seqs(win.truncate(WINDOW, Truncate(role="user", keep_last=1))) == [1, 3, 4, 5, 6]
    assert seqs(win.truncate(WINDOW, Truncate(role="assistant", range=(0, 1)))) == [1, 2, 3, 4, 5]


@given(
    st.lists(st.sampled_from(["system", "user", "assistant", "tool"]), max_size=20),
    st.integers(min_value=0, max_value=25),
    st.integers(min_value=0, max_value=25),
    st.sampled_from([None, "system", "user", "assistant", "tool"]),
)
def test_remove_first_and_remove_last_give_the_same_result_in_either_order(
    roles: list[Role], first: int, last: int, role: Role | None
) -> None:
    # Why these two are the only truncate forms that combine (store.domain.operations).
    window = [entry(i + 1, r) for i, r in enumerate(roles)]
    both = win.truncate(window, Truncate(remove_first=first, remove_last=last, role=role))
    first_then_last = win.truncate(
        win.truncate(window, Truncate(remove_first=first, role=role)),
        Truncate(remove_last=last, role=role),
    )
    last_then_first = win.truncate(
        win.truncate(window, Truncate(remove_last=last, role=role)),
        Truncate(remove_first=first, role=role),
    )
    assert both == first_then_last == last_then_first


def test_filter_by_roles_and_content() -> None:
    assert seqs(win.filter_window(WINDOW, Filter(roles=("user",)))) == [2, 5]
    assert seqs(win.filter_window(WINDOW, Filter(content_contains=("world", "done")))) == [2, 6]
    assert seqs(win.filter_window(WINDOW, Filter(content_excludes=("please",)))) == [
        1,
        2,
        3,
        4,
        6,
    ]
    both = Filter(roles=("user", "assistant"), content_excludes=("please",))
    assert seqs(win.filter_window(WINDOW, both)) == [2, 3, 6]


def test_clear_keeps_system_messages_visible_by_default() -> None:
    assert seqs(win.clear(WINDOW, Clear())) == [1]
    assert seqs(win.clear(WINDOW, Clear(keep_system=False))) == []


def test_from_boundary_with_retained() -> None:
    assert seqs(win.from_boundary(WINDOW, StartBatch(boundary_seq=5, retain=(1,)))) == [1, 5, 6]
    assert seqs(win.from_boundary(WINDOW, StartBatch(boundary_seq=7))) == []
    with pytest.raises(InvalidOperation, match=r"not visible: seq \[1\]"):
        win.from_boundary(WINDOW[2:], StartBatch(boundary_seq=5, retain=(1,)))


def test_select_dispatches_on_the_operation() -> None:
    operations: list[SelectionOperation] = [
        StartBatch(boundary_seq=5),
        Truncate(keep_last=2),
        Filter(roles=("system", "assistant")),
        Clear(keep_system=False),
    ]
    assert [seqs(win.select(WINDOW, op)) for op in operations] == [[5, 6], [5, 6], [1, 3, 6], []]


def test_a_boundary_inside_a_block_is_refused_or_moved() -> None:
    selected = win.from_boundary(WINDOW, StartBatch(boundary_seq=4))
    with pytest.raises(BoundaryError, match="split the tool-call block of message seq 3"):
        win.enforce_tool_blocks(WINDOW, selected, pending_call_ids=())
    moved = win.enforce_tool_blocks(WINDOW, selected, pending_call_ids=(), adjust=True)
    assert seqs(moved) == [3, 4, 5, 6]


def test_hiding_a_pending_call_is_refused_or_kept() -> None:
    window = [*WINDOW, entry(7, "assistant", "", calls=("c2",)), entry(8, "user", "wait")]
    selected = win.truncate(window, Truncate(keep_last=1))
    with pytest.raises(BoundaryError, match="c2"):
        win.enforce_tool_blocks(window, selected, pending_call_ids={"c2"})
    kept = win.enforce_tool_blocks(window, selected, pending_call_ids={"c2"}, adjust=True)
    assert seqs(kept) == [7, 8]


def test_keys_between_are_strictly_inside_and_ordered() -> None:
    keys = win.keys_between(Decimal(2), Decimal(3), 3)
    assert Decimal(2) < keys[0] < keys[1] < keys[2] < Decimal(3)
    with pytest.raises(ValueError, match="no room"):
        win.keys_between(Decimal(3), Decimal(3), 1)


@st.composite
def windows_and_selections(draw: st.DrawFn) -> tuple[list[WindowEntry], list[WindowEntry], int]:
    size = draw(st.integers(min_value=0, max_value=30))
    keys = sorted(
        draw(st.sets(st.integers(min_value=1, max_value=500), min_size=size, max_size=size))
    )
    roles: list[Role] = ["system", "user", "assistant", "tool"]
    window = [
        WindowEntry(seq=k, sort_key=Decimal(k), role=draw(st.sampled_from(roles)), agent_id="main")
        for k in keys
    ]
    selected = [e for e in window if draw(st.booleans())]
    return window, selected, (keys[-1] + 1 if keys else 1)


@given(windows_and_selections())
def test_a_batch_definition_shows_exactly_the_selection(
    case: tuple[list[WindowEntry], list[WindowEntry], int],
) -> None:
    window, selected, next_seq = case
    definition = win.selection_to_batch(window, selected, next_seq=next_seq)
    assert win.apply_batch(window, definition) == selected
    # Retained messages are only what the boundary cannot express.
    assert all(Decimal(s) < definition.boundary for s in definition.retained)


@given(windows_and_selections())
def test_adjusted_selections_never_split_a_block(
    case: tuple[list[WindowEntry], list[WindowEntry], int],
) -> None:
    plain, chosen, _ = case
    # Pair each assistant with the next tool message as one block.
    window, calls = [], 0
    for i, e in enumerate(plain):
        if e.role == "assistant" and i + 1 < len(plain) and plain[i + 1].role == "tool":
            calls += 1
            window.append(replace(e, call_ids=(f"c{calls}",)))
        elif (
            e.role == "tool"
            and window
            and window[-1].call_ids
            and window[-1].seq == plain[i - 1].seq
        ):
            window.append(replace(e, answers=window[-1].call_ids[0]))
        else:
            # A tool message with no call before it stands as a user's.
            window.append(replace(e, role="user") if e.role == "tool" else e)
    chosen_seqs = {e.seq for e in chosen}
    selected = [e for e in window if e.seq in chosen_seqs]
    result = {
        e.seq for e in win.enforce_tool_blocks(window, selected, pending_call_ids=(), adjust=True)
    }
    assert chosen_seqs <= result
    for e in window:
        if e.answers is not None:
            call = next(a for a in window if e.answers in a.call_ids)
            assert (e.seq in result) == (call.seq in result)
