"""Batch operations as pure functions over the visible window.

Every context operation of docs/behaviours.md §4 (truncate, filter, clear,
start_batch, insert, rollback) is decided here, on the current visible
window, with no I/O; `store.domain.commands` calls these whatever the storage,
so backends cannot disagree. They take the operations as the
values of `store.domain.operations`, which have checked everything that can be
checked on the value alone; what needs the window (retained messages that
are not visible, tool blocks) is checked here. Each operation returns the
entries the new batch shows; `selection_to_batch` turns that into the batch's
definition (boundary + retained), and `enforce_tool_blocks` refuses — or,
when asked, repairs — a selection that would split a tool-call block or
hide a call still waiting for its result.

Bugs of the source SDK that we do not reproduce: a valid keepLast that
throws after half-applying (we compute, then apply once); clear that keeps
the system message stored but shows nothing (kept system messages are
shown); a role-restricted truncate that hides every other role (other
roles are left alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import assert_never

from store.domain.errors import BoundaryError, InvalidOperation
from store.domain.messages import Role
from store.domain.operations import Clear, Filter, SelectionOperation, StartBatch, Truncate


@dataclass(frozen=True, kw_only=True)
class WindowEntry:
    """What a batch operation needs to know of one visible message."""

    seq: int
    sort_key: Decimal
    role: Role
    agent_id: str
    text: str = ""
    call_ids: tuple[str, ...] = ()  # an assistant message's tool calls
    answers: str | None = None  # the call a tool message answers


@dataclass(frozen=True, kw_only=True)
class BatchDefinition:
    boundary: Decimal
    retained: tuple[int, ...]


def select(window: Sequence[WindowEntry], operation: SelectionOperation) -> list[WindowEntry]:
    """The entries the new batch of `operation` shows (before tool blocks
    are checked)."""
    match operation:
        case StartBatch():
            return from_boundary(window, operation)
        case Truncate():
            return truncate(window, operation)
        case Filter():
            return filter_window(window, operation)
        case Clear():
            return clear(window, operation)
        case _:
            assert_never(operation)


def truncate(window: Sequence[WindowEntry], operation: Truncate) -> list[WindowEntry]:
    """Keep part of the window — or, with `role`, of that role's messages,
    every other role staying as it is. `range` is [start, end) over that
    list; `remove_first` and `remove_last` (the only forms that combine)
    give the same result in either order."""
    role = operation.role
    kept = [e for e in window if role is None or e.role == role]
    if operation.keep_first is not None:
        kept = kept[: operation.keep_first]
    if operation.keep_last is not None:
        kept = kept[-operation.keep_last :] if operation.keep_last else []
    if operation.remove_first is not None:
        kept = kept[operation.remove_first :]
    if operation.remove_last is not None:
        kept = kept[: max(len(kept) - operation.remove_last, 0)]
    if operation.range is not None:
        start, end = operation.range
        kept = kept[start:end]
    kept_seqs = {e.seq for e in kept}
    return [e for e in window if e.seq in kept_seqs or (role is not None and e.role != role)]


def filter_window(window: Sequence[WindowEntry], operation: Filter) -> list[WindowEntry]:
    """Keep messages of the given roles, containing any of `content_contains`
    and none of `content_excludes`."""
    wanted = set(operation.roles) if operation.roles is not None else None
    contains = operation.content_contains or ()
    excludes = operation.content_excludes or ()
    return [
        e
        for e in window
        if (wanted is None or e.role in wanted)
        and (not contains or any(s in e.text for s in contains))
        and not any(s in e.text for s in excludes)
    ]


def clear(window: Sequence[WindowEntry], operation: Clear) -> list[WindowEntry]:
    """Hide everything, or everything but the system messages (which stay shown)."""
    return [e for e in window if operation.keep_system and e.role == "system"]


def from_boundary(window: Sequence[WindowEntry], operation: StartBatch) -> list[WindowEntry]:
    """`start_batch`: the window from the message `boundary_seq` on, plus the
    retained messages (which must be visible now)."""
    by_seq = {e.seq: e for e in window}
    retained = set(operation.retain)
    missing = sorted(retained - set(by_seq))
    if missing:
        raise InvalidOperation(f"cannot retain messages that are not visible: seq {missing}")
    anchor = by_seq.get(operation.boundary_seq)
    key = anchor.sort_key if anchor is not None else Decimal(operation.boundary_seq)
    return [e for e in window if e.sort_key >= key or e.seq in retained]


def enforce_tool_blocks(
    window: Sequence[WindowEntry],
    selected: Sequence[WindowEntry],
    *,
    pending_call_ids: Iterable[str],
    adjust: bool = False,
) -> list[WindowEntry]:
    """Refuse a selection that splits a tool-call block or hides a pending
    call; with `adjust`, grow it to whole blocks and keep pending calls."""
    pending = set(pending_call_ids)
    chosen = {e.seq for e in selected}
    result_of = {e.answers: e for e in window if e.answers is not None}
    for entry in window:
        if not entry.call_ids:
            continue
        block = [entry] + [result_of[c] for c in entry.call_ids if c in result_of]
        shown = [e.seq in chosen for e in block]
        waiting = sorted(set(entry.call_ids) & pending)
        if waiting and not shown[0]:
            if not adjust:
                raise BoundaryError(
                    f"this would hide tool call(s) {', '.join(waiting)} (message seq "
                    f"{entry.seq}) still waiting for a result; pass adjust=True to keep them"
                )
            chosen.update(e.seq for e in block)
        elif any(shown) and not all(shown):
            if not adjust:
                raise BoundaryError(
                    f"this would split the tool-call block of message seq {entry.seq} "
                    f"(calls {', '.join(entry.call_ids)}); pass adjust=True to move the "
                    "boundary to the block's start"
                )
            chosen.update(e.seq for e in block)
    return [e for e in window if e.seq in chosen]


def selection_to_batch(
    window: Sequence[WindowEntry], selected: Sequence[WindowEntry], *, next_seq: int
) -> BatchDefinition:
    """The batch definition that shows exactly `selected` out of `window`:
    the longest fully selected tail of the window becomes the boundary, and
    whatever is selected before it is retained explicitly."""
    chosen = {e.seq for e in selected}
    boundary = Decimal(next_seq)
    for entry in reversed(window):
        if entry.seq not in chosen:
            break
        boundary = entry.sort_key
    retained = tuple(sorted(e.seq for e in window if e.seq in chosen and e.sort_key < boundary))
    return BatchDefinition(boundary=boundary, retained=retained)


def apply_batch(source: Sequence[WindowEntry], definition: BatchDefinition) -> list[WindowEntry]:
    """The inverse of `selection_to_batch`: the entries a definition shows."""
    retained = set(definition.retained)
    return [e for e in source if e.sort_key >= definition.boundary or e.seq in retained]


def keys_between(low: Decimal, high: Decimal, count: int) -> list[Decimal]:
    """`count` sort keys strictly between `low` and `high`, evenly spaced."""
    if not low < high:
        raise ValueError(f"no room between sort keys {low} and {high}")
    step = (high - low) / (count + 1)
    keys = [low + step * (i + 1) for i in range(count)]
    if not (low < keys[0] and keys[-1] < high and len(set(keys)) == count):
        raise InvalidOperation(f"sort keys between {low} and {high} are exhausted")
    return keys
