"""What no provider can take, made sendable before anything else (behaviours
§3): tool-call ids reused by a later call, and non-finite numbers in tool
arguments. Done whatever `repair` says: without it the payload would pair a
result with the wrong call, or would not be JSON at all.

**Duplicate call ids.** The store refuses a call id used twice in one
conversation, but `assemble` is public and takes any messages (a document, a
log from a server that numbers calls per turn: `functions.ls:0` in every
turn). A later call reusing an id is renamed `<id>_<k>` (the first k from 2
that no id of the window uses), and every result that follows it and names
that id is renamed with it: a result answers the most recent earlier call
with its id. One `renamed_duplicate_tool_id` repair per renamed call.

**Non-finite numbers.** NaN and ±Infinity have no JSON spelling: OpenAI's
`arguments` would not be JSON, and the SDKs refuse to send them. They go as
the strings "NaN", "Infinity", "-Infinity" (as the XML tool protocol always
sent them), one `replaced_non_finite_number` repair per call, naming where.
(The store refuses them on the way in; a log written under other limits, or
messages built in code, can still carry them.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from store.assembler.diagnostics import Repair, RepairKind
from store.domain.messages import Message, ToolCall


def non_finite_text(number: float) -> str:
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


_SCALARS = (str, int, bool, type(None))


def has_non_finite(value: Any) -> bool:
    """Whether a non-finite number is anywhere in `value` (parsed JSON); the
    common case, a small object of strings and integers, in a few steps."""
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return isinstance(value, float) and not math.isfinite(value)
    for item in items:
        if item.__class__ in _SCALARS:
            continue
        if item.__class__ is float:
            if item - item != 0.0:  # NaN - NaN and inf - inf are NaN
                return True
        elif has_non_finite(item):
            return True
    return False


def finite(value: Any) -> Any:
    """`value` with every non-finite number replaced by its text."""
    if isinstance(value, float) and not math.isfinite(value):
        return non_finite_text(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def _non_finite_paths(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, float) and not math.isfinite(value):
        yield path or "/"
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _non_finite_paths(child, f"{path}/{key}")
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            yield from _non_finite_paths(child, f"{path}/{index}")


def _all_ids(messages: Sequence[Message]) -> set[str]:
    ids = {call.id for m in messages for call in m.tool_calls}
    ids.update(m.tool_call_id for m in messages if m.tool_call_id is not None)
    return ids


def sanitize_window(messages: Sequence[Message]) -> tuple[list[Message], list[Repair]]:
    """Unique call ids and finite arguments; returns the new list and repairs
    (`message_index`: the index in `messages`)."""
    repairs: list[Repair] = []
    out = list(messages)
    seen: set[str] = set()  # call ids issued so far (after renaming)
    latest: dict[str, str] = {}  # reused id -> the id its most recent call goes by
    taken: set[str] | None = None  # every id of the window, once a duplicate needs a name
    for i, message in enumerate(messages):
        tool_calls = message.tool_calls
        if not tool_calls:  # most messages: one attribute read
            if latest and message.tool_call_id in latest:
                out[i] = message.model_copy(update={"tool_call_id": latest[message.tool_call_id]})
            continue
        calls: list[ToolCall] | None = None
        for k, call in enumerate(tool_calls):
            fixed = call
            if call.id in seen:
                if taken is None:
                    taken = _all_ids(messages)
                n = 2
                while f"{call.id}_{n}" in taken:
                    n += 1
                new_id = f"{call.id}_{n}"
                taken.add(new_id)
                latest[call.id] = new_id
                fixed = fixed.model_copy(update={"id": new_id})
                repairs.append(
                    Repair(
                        kind=RepairKind.RENAMED_DUPLICATE_TOOL_ID,
                        detail=f"call {call.id!r} ({call.name}) reuses the id of an earlier "
                        f"call; it and its result(s) go as {new_id!r}",
                        message_index=i,
                    )
                )
            seen.add(fixed.id)
            if call.arguments and has_non_finite(call.arguments):
                paths = ", ".join(_non_finite_paths(call.arguments, ""))
                fixed = fixed.model_copy(update={"arguments": finite(call.arguments)})
                repairs.append(
                    Repair(
                        kind=RepairKind.REPLACED_NON_FINITE_NUMBER,
                        detail=f"call {fixed.id!r} ({call.name}): non-finite number(s) at "
                        f"{paths} sent as text (NaN, Infinity, -Infinity)",
                        message_index=i,
                    )
                )
            if fixed is not call:
                if calls is None:
                    calls = list(tool_calls)
                calls[k] = fixed
        if calls is not None:
            out[i] = message.model_copy(update={"tool_calls": tuple(calls)})
    return out, repairs
