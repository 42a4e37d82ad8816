"""Commands: what the agents ask for, decided into domain events.

Each command reads what it needs through a `ConversationState` (the
PostgreSQL repository implements it with index look-ups inside the append
transaction, the in-memory fake with dicts), validates, and returns the
events to append. Nothing here writes; nothing here knows SQL. Because the
decisions (sequence numbers, sort keys, which messages a new batch shows)
are made once and recorded in the events, projections only apply them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from pydantic import ValidationError

from store import window as win
from store.context import TODO, AgentProfile, TodoItem
from store.errors import BoundaryError, InvalidMessage, InvalidOperation
from store.events import (
    AgentConfigured,
    BatchStarted,
    ContextSlotUpdated,
    DomainEvent,
    MessageAppended,
    MessageEdited,
)
from store.messages import Content, Message, MessageKind, Role, StoredMessage
from store.settings import Settings
from store.tokens import TokenCounter, approximate_tokens, estimate_message_tokens
from store.validation import CallState, call_ids_involved, content_chars, validate_append


@dataclass(frozen=True, kw_only=True)
class Head:
    next_seq: int
    current_batch: int


class ConversationState(Protocol):
    """Read access a command needs, on a conversation locked for writing."""

    conversation_id: uuid.UUID

    async def head(self) -> Head: ...
    async def calls(self, call_ids: set[str]) -> dict[str, CallState]: ...
    async def pending_call_ids(self) -> set[str]: ...
    async def window(self) -> list[win.WindowEntry]: ...
    async def batch_window(self, batch: int) -> list[win.WindowEntry] | None: ...
    async def key_after(self, key: Decimal) -> Decimal | None: ...
    async def key_before(self, key: Decimal) -> Decimal | None: ...
    async def message(self, seq: int) -> StoredMessage | None: ...


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_message_chars: int = 1_000_000
    count_tokens: TokenCounter = approximate_tokens

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(max_message_chars=settings.max_message_chars)


def _prepared(message: Message, limits: Limits) -> Message:
    # A caller's own estimate (e.g. the provider's usage figures) wins.
    if message.token_estimate is not None:
        return message
    estimate = estimate_message_tokens(message, limits.count_tokens)
    return message.model_copy(update={"token_estimate": estimate})


async def append_messages(
    state: ConversationState,
    messages: Sequence[Message],
    limits: Limits,
    *,
    sort_keys: Sequence[Decimal] | None = None,
    batch: int | None = None,
    head: Head | None = None,
) -> list[DomainEvent]:
    """Validate `messages` against the thread and number them."""
    if not messages:
        raise InvalidOperation("append needs at least one message")
    known = await state.calls(call_ids_involved(messages))
    validate_append(messages, known_calls=known, max_chars=limits.max_message_chars)
    head = head or await state.head()
    batch = head.current_batch if batch is None else batch
    events: list[DomainEvent] = []
    for i, message in enumerate(messages):
        seq = head.next_seq + i
        key = Decimal(seq) if sort_keys is None else sort_keys[i]
        events.append(
            MessageAppended(seq=seq, sort_key=key, batch=batch, message=_prepared(message, limits))
        )
    return events


async def _new_batch(
    state: ConversationState,
    selected: Sequence[win.WindowEntry],
    window: Sequence[win.WindowEntry],
    *,
    operation: str,
    parameters: dict[str, Any],
    adjust: bool,
    summary_seq: int | None = None,
) -> tuple[BatchStarted, Head]:
    checked = win.enforce_tool_blocks(
        window, selected, pending_call_ids=await state.pending_call_ids(), adjust=adjust
    )
    head = await state.head()
    definition = win.selection_to_batch(window, checked, next_seq=head.next_seq)
    event = BatchStarted(
        batch=head.current_batch + 1,
        boundary=definition.boundary,
        retained=definition.retained,
        summary_seq=summary_seq,
        operation=operation,
        parameters=parameters,
    )
    return event, Head(next_seq=head.next_seq, current_batch=head.current_batch + 1)


async def select_batch(
    state: ConversationState,
    operation: str,
    parameters: dict[str, Any],
    *,
    adjust: bool = False,
) -> list[DomainEvent]:
    """truncate / filter / clear: a new batch showing part of the window."""
    window = await state.window()
    if operation == "truncate":
        role: Role | None = parameters.get("role")
        range_ = parameters.get("range")
        selected = win.truncate(
            window,
            keep_first=parameters.get("keep_first"),
            keep_last=parameters.get("keep_last"),
            remove_first=parameters.get("remove_first"),
            remove_last=parameters.get("remove_last"),
            range_=(int(range_[0]), int(range_[1])) if range_ is not None else None,
            role=role,
        )
    elif operation == "filter":
        selected = win.filter_window(
            window,
            roles=parameters.get("roles"),
            content_contains=parameters.get("content_contains"),
            content_excludes=parameters.get("content_excludes"),
        )
    elif operation == "clear":
        selected = win.clear(window, keep_system=parameters.get("keep_system", True))
    else:  # pragma: no cover - the repository only passes the three above
        raise InvalidOperation(f"unknown batch operation {operation!r}")
    event, _ = await _new_batch(
        state, selected, window, operation=operation, parameters=parameters, adjust=adjust
    )
    return [event]


async def start_batch(
    state: ConversationState,
    boundary_seq: int,
    limits: Limits,
    *,
    summary: Message | None = None,
    retain: Sequence[int] = (),
    adjust: bool = False,
) -> list[DomainEvent]:
    """A new batch from `boundary_seq` on, optionally led by a summary
    message (appended now, shown just before the boundary)."""
    window = await state.window()
    selected = win.from_boundary(window, boundary_seq, retain=retain)
    head = await state.head()
    parameters: dict[str, Any] = {"boundary_seq": boundary_seq, "retain": list(retain)}
    summary_seq = head.next_seq if summary is not None else None
    event, new_head = await _new_batch(
        state,
        selected,
        window,
        operation="start_batch",
        parameters=parameters,
        adjust=adjust,
        summary_seq=summary_seq,
    )
    events: list[DomainEvent] = [event]
    if summary is not None:
        summary = summary.model_copy(update={"kind": MessageKind.SUMMARY})
        tail = [e for e in window if e.sort_key >= event.boundary]
        key = await _keys_before(state, tail[0].sort_key, 1) if tail else [Decimal(head.next_seq)]
        events += await append_messages(
            state, [summary], limits, sort_keys=key, batch=new_head.current_batch, head=new_head
        )
    return events


async def _keys_before(state: ConversationState, key: Decimal, count: int) -> list[Decimal]:
    low = await state.key_before(key) or Decimal(0)
    return win.keys_between(low, key, count)


async def insert_messages(
    state: ConversationState,
    position: int,
    messages: Sequence[Message],
    limits: Limits,
) -> list[DomainEvent]:
    """Place new messages at `position` of the visible window, in a new batch.

    The log stays append-only: the messages get the next sequence numbers,
    and sort keys that put them where they were asked for.
    """
    window = await state.window()
    if not 0 <= position <= len(window):
        raise InvalidOperation(
            f"insert position {position} is outside the window (0..{len(window)})"
        )
    for i, message in enumerate(messages):
        if message.tool_calls or message.role == "tool":
            raise InvalidMessage(
                "tool calls and tool results cannot be inserted; append them instead", index=i
            )
    before = window[position - 1] if position > 0 else None
    after = window[position] if position < len(window) else None
    if after is not None and after.answers is not None:
        # Results follow their call: a result right after the point means
        # the point is inside a tool-call block.
        raise InvalidOperation(f"insert position {position} is inside a tool-call block")
    waiting = _waiting_calls_of_block(window, before, await state.pending_call_ids())
    if waiting:
        # The result still to come must follow its call; anything placed
        # here would end up between them.
        raise InvalidOperation(
            f"insert position {position} follows tool call(s) {', '.join(waiting)} "
            "still waiting for a result"
        )
    head = await state.head()
    if after is None:
        keys = [Decimal(head.next_seq + i) for i in range(len(messages))]
    elif before is None:
        keys = await _keys_before(state, after.sort_key, len(messages))
    else:
        high = await state.key_after(before.sort_key)
        keys = win.keys_between(before.sort_key, high or after.sort_key, len(messages))
    event, new_head = await _new_batch(
        state,
        window,
        window,
        operation="insert",
        parameters={"position": position, "count": len(messages)},
        adjust=False,
    )
    appended = await append_messages(
        state, messages, limits, sort_keys=keys, batch=new_head.current_batch, head=new_head
    )
    return [event, *appended]


def _waiting_calls_of_block(
    window: Sequence[win.WindowEntry], entry: win.WindowEntry | None, pending: set[str]
) -> list[str]:
    """Pending call ids of the tool block `entry` belongs to (if any)."""
    if entry is None:
        return []
    calls = entry.call_ids
    if entry.answers is not None:
        calls = next((e.call_ids for e in window if entry.answers in e.call_ids), ())
    return sorted(set(calls) & pending)


async def rollback_to_batch(state: ConversationState, batch: int) -> list[DomainEvent]:
    """Make batch k's view current again, as a new batch."""
    source = await state.batch_window(batch)
    if source is None:
        raise InvalidOperation(f"there is no batch {batch} to roll back to")
    shown_calls = {c for e in source for c in e.call_ids}
    hidden = sorted(await state.pending_call_ids() - shown_calls)
    if hidden:
        raise BoundaryError(
            f"batch {batch} does not show tool call(s) {', '.join(hidden)} still waiting for "
            "a result; rolling back to it would orphan their results"
        )
    win.enforce_tool_blocks(source, source, pending_call_ids=())
    head = await state.head()
    definition = win.selection_to_batch(source, source, next_seq=head.next_seq)
    return [
        BatchStarted(
            batch=head.current_batch + 1,
            boundary=definition.boundary,
            retained=definition.retained,
            operation="rollback_to_batch",
            parameters={"batch": batch},
        )
    ]


async def replace_content(
    state: ConversationState, seq: int, content: Content, limits: Limits
) -> list[DomainEvent]:
    """Edit a message's content; the original stays in the log."""
    original = await state.message(seq)
    if original is None:
        raise InvalidOperation(f"there is no message with seq {seq}")
    try:
        edited = Message.model_validate(
            {**original.as_message().model_dump(), "content": content, "token_estimate": None}
        )
    except ValidationError as error:
        raise InvalidMessage(
            error.errors()[0]["msg"], client_id=original.client_message_id
        ) from None
    size = content_chars(edited)
    if size > limits.max_message_chars:
        raise InvalidMessage(
            f"content is {size} characters, over the limit of {limits.max_message_chars}",
            client_id=original.client_message_id,
        )
    if original.content == edited.content:
        raise InvalidOperation(f"replace would not change message {seq}: same content")
    return [
        MessageEdited(
            seq=seq,
            content=edited.content,
            previous_content=original.content,
            token_estimate=estimate_message_tokens(edited, limits.count_tokens),
        )
    ]


def configure_agent(profile: AgentProfile) -> list[DomainEvent]:
    if profile.is_sub_agent and profile.agent_id == "main":
        raise InvalidOperation("the main agent cannot be configured as a sub-agent")
    return [AgentConfigured(profile=profile)]


def update_slot(
    agent_id: str, slot: str, value: str | Sequence[TodoItem] | None
) -> list[DomainEvent]:
    if not slot or not slot.replace("_", "").replace("-", "").isalnum():
        raise InvalidOperation(f"slot names are letters, digits, '-' and '_'; got {slot!r}")
    if slot == TODO:
        if isinstance(value, str):
            raise InvalidOperation("the todo slot holds a list of items, not text")
        items = tuple(TodoItem.model_validate(i) for i in value) if value is not None else None
        ids = [i.id for i in items or ()]
        if len(ids) != len(set(ids)):
            raise InvalidOperation(
                f"duplicate todo item ids: {sorted({i for i in ids if ids.count(i) > 1})}"
            )
        return [ContextSlotUpdated(agent_id=agent_id, slot=slot, todo=items)]
    if value is not None and not isinstance(value, str):
        raise InvalidOperation(f"the {slot} slot holds text")
    return [ContextSlotUpdated(agent_id=agent_id, slot=slot, text=value)]
