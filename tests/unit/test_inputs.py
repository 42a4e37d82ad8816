"""store.domain.inputs: the limits every value from outside meets, in the library
itself (InvalidMessage / InvalidOperation), not only over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from store.domain.errors import InvalidMessage, InvalidOperation
from store.domain.events import MessageAppended, from_data
from store.domain.inputs import (
    MAX_ARGUMENTS_CHARS,
    MAX_JSON_DEPTH,
    MAX_TOOL_CALLS,
    json_problem,
    text_problem,
)
from store.domain.validation import parse_message
from store.memory import InMemoryRepository


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("plain", None),
        ("naïve ☃ 😀", None),
        ("a\x00b", "NUL"),
        ("é\x00", "NUL"),
        ("a\ud800", "lone surrogate"),
        ("\udfff", "lone surrogate"),
    ],
)
def test_text_that_cannot_be_stored(value: str, problem: str | None) -> None:
    found = text_problem(value)
    assert (found is None) if problem is None else (problem in (found or ""))


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"a": [1, 2.5, "x", None, True, {"b": -(2**63)}]}, None),
        ({"a": float("nan")}, "at a: nan is not a JSON number"),
        ({"a": [1, float("inf")]}, "at a/1: inf is not a JSON number"),
        ({"a": 2**63}, "past the 64-bit integer range"),
        ({"k\x00": 1}, "a key contains a NUL"),
        ({"a": {"b": "\ud800"}}, "at a/b: contains a lone surrogate"),
        (_nested(MAX_JSON_DEPTH), None),
        (_nested(MAX_JSON_DEPTH + 1), f"nested deeper than {MAX_JSON_DEPTH} levels"),
        ({"blob": "x" * 100}, "over the limit of 50 characters"),
        ({"when": object()}, "a object is not a JSON value"),
    ],
)
def test_json_that_cannot_be_stored(value: Any, problem: str | None) -> None:
    found = json_problem(value, max_chars=50 if "blob" in value else MAX_ARGUMENTS_CHARS)
    assert (found is None) if problem is None else (problem in (found or "")), found


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"role": "user", "content": "a\x00"}, "content"),
        ({"role": "user", "content": "x", "metadata": {"n": float("nan")}}, "metadata"),
        ({"role": "user", "content": "x", "agent_id": "a" * 101}, "agent_id"),
        ({"role": "user", "content": "x", "client_message_id": "id\n"}, "client_message_id"),
        ({"role": "user", "content": "x", "token_estimate": -5}, "token_estimate"),
        ({"role": "user", "content": "x", "token_estimate": "5"}, "token_estimate"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": f"c{i}", "name": "ls"} for i in range(MAX_TOOL_CALLS + 1)],
            },
            "tool_calls",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "name": "ls", "arguments": _nested(100)}],
            },
            "tool_calls.0.arguments",
        ),
    ],
)
def test_the_library_refuses_a_hostile_message_naming_the_field(
    raw: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidMessage, match=field):
        parse_message(raw, 0)


async def test_an_append_over_the_configured_count_is_refused_before_anything_is_stored() -> None:
    from store.domain.commands import Limits

    repository = InMemoryRepository(limits=Limits(max_messages_per_append=3))
    cid = (await repository.create_conversation()).id
    messages = [{"role": "user", "content": f"m{i}"} for i in range(4)]
    with pytest.raises(InvalidMessage, match="4 in one append, over the limit of 3"):
        await repository.append_messages(cid, messages)
    assert (await repository.get_conversation(cid)).version == 1


@pytest.mark.parametrize(
    ("agent_id", "slot", "value", "says"),
    [
        ("main", "useful_info", "a\x00", "NUL"),
        ("main", "s" * 101, "x", "at most 100 characters"),
        ("a\x00", "useful_info", "x", "agent_id"),
        ("main", "useful_info", "x" * 1_000_001, "over the limit"),
    ],
)
async def test_a_hostile_slot_update_is_refused(
    agent_id: str, slot: str, value: str, says: str
) -> None:
    repository = InMemoryRepository()
    cid = (await repository.create_conversation()).id
    with pytest.raises(InvalidOperation, match=says):
        await repository.update_slot(cid, slot, value, agent_id=agent_id)
    assert (await repository.get_conversation(cid)).version == 1


def test_the_log_replays_under_the_limits_of_its_day() -> None:
    """A message stored before a limit existed still replays (convo rebuild),
    though the same message is refused as input now."""
    stored = {"role": "user", "kind": "input", "content": "x", "client_message_id": "c" * 300}
    replayed = from_data("message_appended", {"seq": 1, "batch": 1, "message": stored})
    assert isinstance(replayed, MessageAppended)
    assert replayed.message.client_message_id == "c" * 300
    with pytest.raises(InvalidMessage, match="client_message_id"):
        parse_message(stored, 0)
