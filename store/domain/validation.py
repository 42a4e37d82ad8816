"""Rules an appended message must meet against its thread.

`store.domain.messages` checks what one message can check alone. Here: does the
call a tool message answers exist in that agent's thread, and is it still
unanswered; are new tool call ids unique in the conversation; is the
content within the size limit; does the append hold no more messages than
allowed. Errors name the message (its index in the append, its client id)
and the problem; raising here means nothing of the append is stored.

Context slots are checked here too (`check_slot`): the agent id, the slot
name and the text, by the rules of `store.domain.inputs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from store.domain.errors import InvalidMessage, InvalidOperation
from store.domain.inputs import (
    MAX_AGENT_ID_CHARS,
    MAX_TEXT_CHARS,
    MAX_TODO_ITEMS,
    identifier_problem,
    slot_name_problem,
    text_problem,
)
from store.domain.messages import Message

DEFAULT_MAX_MESSAGES_PER_APPEND = 1_000
# The most messages a conversation holds: a role's ordinal is stored in 4
# bytes (migration 0016), and none can exceed the message count.
MAX_MESSAGES_PER_CONVERSATION = 2**31 - 1
# What `CONVO_MAX_MESSAGES_PER_APPEND` may be set to at most; the HTTP API
# refuses a longer list before it parses a single message.
MAX_MESSAGES_PER_APPEND = 10_000


@dataclass(frozen=True, kw_only=True)
class CallState:
    agent_id: str
    answered: bool


def parse_message(raw: Any, index: int) -> Message:
    """A Message from untrusted input, or InvalidMessage naming what is wrong."""
    if isinstance(raw, Message):
        return raw
    try:
        return Message.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}" for e in error.errors()
        )
        client_id = raw.get("client_message_id") if isinstance(raw, dict) else None
        raise InvalidMessage(problems, index=index, client_id=client_id) from None


def call_ids_involved(messages: Sequence[Message]) -> set[str]:
    """The call ids whose state validation needs: new calls and answered calls."""
    ids = {c.id for m in messages for c in m.tool_calls}
    ids.update(m.tool_call_id for m in messages if m.tool_call_id is not None)
    return ids


def check_append_size(count: int, limit: int) -> None:
    """Refuse an append of more than `limit` messages, before any is looked at."""
    if count > limit:
        raise InvalidMessage(f"messages: {count} in one append, over the limit of {limit}")


def check_conversation_size(held: int, adding: int, limit: int) -> None:
    """Refuse messages that would take a conversation past `limit` messages."""
    if held + adding > limit:
        raise InvalidOperation(
            f"the conversation holds {held:,} messages and may hold at most {limit:,}:"
            f" {adding:,} more do not fit (start a new conversation)"
        )


def check_slot(agent_id: str, slot: str, value: Any) -> None:
    """Refuse a slot update whose agent id, slot name or text breaks a rule
    (todo items are `TodoItem`s, which check themselves)."""
    if problem := identifier_problem(agent_id, MAX_AGENT_ID_CHARS):
        raise InvalidOperation(f"agent_id: {problem}")
    if problem := slot_name_problem(slot):
        raise InvalidOperation(problem)
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            raise InvalidOperation(
                f"slot {slot}: {len(value)} characters, over the limit of {MAX_TEXT_CHARS}"
            )
        if problem := text_problem(value):
            raise InvalidOperation(f"slot {slot}: the value {problem}")
    elif isinstance(value, Sequence) and len(value) > MAX_TODO_ITEMS:
        raise InvalidOperation(
            f"slot {slot}: {len(value)} items, over the limit of {MAX_TODO_ITEMS}"
        )


def content_chars(message: Message) -> int:
    if isinstance(message.content, str):
        return len(message.content)
    return sum(len(p.model_dump_json()) for p in message.content)


def validate_append(
    messages: Sequence[Message],
    *,
    known_calls: Mapping[str, CallState],
    max_chars: int,
) -> None:
    """Check `messages`, in order, against the calls already in the thread."""
    calls = dict(known_calls)
    for index, message in enumerate(messages):

        def fail(problem: str, message: Message = message, index: int = index) -> InvalidMessage:
            return InvalidMessage(problem, index=index, client_id=message.client_message_id)

        size = content_chars(message)
        if size > max_chars:
            raise fail(f"content is {size} characters, over the limit of {max_chars}")
        for call in message.tool_calls:
            if call.id in calls:
                raise fail(f"duplicate tool call id {call.id!r}: already used in this conversation")
            calls[call.id] = CallState(agent_id=message.agent_id, answered=False)
        if message.tool_call_id is not None:
            state = calls.get(message.tool_call_id)
            if state is None or state.agent_id != message.agent_id:
                raise fail(
                    f"tool result for call {message.tool_call_id!r}, which does not exist "
                    f"in agent {message.agent_id!r}'s thread"
                )
            if state.answered:
                raise fail(f"tool call {message.tool_call_id!r} was already answered")
            calls[message.tool_call_id] = CallState(agent_id=state.agent_id, answered=True)
