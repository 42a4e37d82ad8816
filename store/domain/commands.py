"""Commands: what the agents ask for, decided into domain events.

Each command reads what it needs through a `ConversationState` (the
PostgreSQL repository implements it with index look-ups inside the append
transaction, the in-memory fake with dicts), validates, and returns the
events to append. Nothing here writes; nothing here knows SQL. Because the
decisions (sequence numbers, sort keys, which messages a new batch shows)
are made once and recorded in the events, projections only apply them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol, assert_never

from pydantic import ValidationError

from store.domain import window as win
from store.domain.codec import with_fields
from store.domain.context import TODO, AgentProfile, TodoItem
from store.domain.errors import BoundaryError, InvalidMessage, InvalidOperation
from store.domain.events import (
    AgentConfigured,
    BatchStarted,
    ContextSlotUpdated,
    ConversationMetadataChanged,
    DomainEvent,
    MessageAppended,
    MessageEdited,
    MessagePinned,
)
from store.domain.messages import Content, Message, MessageKind, StoredMessage
from store.domain.operations import (
    BatchOperation,
    Clear,
    Filter,
    Insert,
    RollbackToBatch,
    StartBatch,
    Truncate,
)
from store.domain.tokens import TokenCounter, approximate_tokens, estimate_message_tokens
from store.domain.validation import (
    DEFAULT_MAX_MESSAGES_PER_APPEND,
    MAX_MESSAGES_PER_CONVERSATION,
    CallState,
    call_ids_involved,
    check_append_size,
    check_conversation_size,
    check_slot,
    content_chars,
    validate_append,
)


@dataclass(frozen=True, kw_only=True)
class Head:
    """Where the views are: the next seq, and each agent's current batch —
    its own (`agent_batches`) once it has run a batch operation, else
    `current_batch`, the batch every agent's window started in."""

    next_seq: int
    current_batch: int
    agent_batches: Mapping[str, int] = field(default_factory=dict)

    def batch_of(self, agent_id: str) -> int:
        """The batch `agent_id`'s window is in: where its messages go."""
        return self.agent_batches.get(agent_id, self.current_batch)

    @property
    def last_batch(self) -> int:
        """The highest batch number so far (a new batch is this + 1): an
        agent's batch only ever moves to a new, higher one."""
        return max([self.current_batch, *self.agent_batches.values()])

    def moved(self, agent_id: str, batch: int) -> Head:
        """The head once `agent_id`'s window is in `batch`."""
        return Head(
            next_seq=self.next_seq,
            current_batch=self.current_batch,
            agent_batches={**self.agent_batches, agent_id: batch},
        )


class ConversationState(Protocol):
    """Read access a command needs, on a conversation locked for writing."""

    conversation_id: uuid.UUID

    async def head(self) -> Head: ...
    async def calls(self, call_ids: set[str]) -> dict[str, CallState]: ...
    async def pending_call_ids(self, agent_id: str | None = None) -> set[str]:
        """The calls still waiting for a result (of `agent_id`, if given)."""
        ...

    async def window(self, agent_id: str) -> list[win.WindowEntry]:
        """`agent_id`'s current window."""
        ...

    async def batch_window(
        self, batch: int, agent_id: str | None = None
    ) -> list[win.WindowEntry] | None:
        """Batch `batch`'s window (of `agent_id`'s messages, if given); None
        when there is no such batch, or it is another agent's."""
        ...

    async def key_after(self, key: Decimal) -> Decimal | None: ...
    async def key_before(self, key: Decimal) -> Decimal | None: ...
    async def message(self, seq: int) -> StoredMessage | None: ...


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What a command allows (`hosting.settings.limits_from_settings` reads
    them from the environment). The fixed limits on every field are in
    `store.domain.inputs`."""

    max_message_chars: int = 1_000_000
    max_messages_per_append: int = DEFAULT_MAX_MESSAGES_PER_APPEND
    # At most MAX_MESSAGES_PER_CONVERSATION: a message's role ordinal is
    # stored in 4 bytes (migration 0016).
    max_messages_per_conversation: int = MAX_MESSAGES_PER_CONVERSATION
    count_tokens: TokenCounter = approximate_tokens

    def __post_init__(self) -> None:
        if not 1 <= self.max_messages_per_conversation <= MAX_MESSAGES_PER_CONVERSATION:
            raise ValueError(
                "max_messages_per_conversation must be between 1 and"
                f" {MAX_MESSAGES_PER_CONVERSATION:,}"
            )


def _prepared(message: Message, limits: Limits) -> Message:
    # A caller's own estimate (e.g. the provider's usage figures) wins.
    if message.token_estimate is not None:
        return message
    estimate = estimate_message_tokens(message, limits.count_tokens)
    return with_fields(message, token_estimate=estimate)


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
    check_append_size(len(messages), limits.max_messages_per_append)
    known = await state.calls(call_ids_involved(messages))
    validate_append(messages, known_calls=known, max_chars=limits.max_message_chars)
    head = head or await state.head()
    check_conversation_size(head.next_seq - 1, len(messages), limits.max_messages_per_conversation)
    events: list[DomainEvent] = []
    for i, message in enumerate(messages):
        seq = head.next_seq + i
        key = Decimal(seq) if sort_keys is None else sort_keys[i]
        # Each message joins its own agent's window.
        number = head.batch_of(message.agent_id) if batch is None else batch
        events.append(
            MessageAppended.decided(
                seq=seq, sort_key=key, batch=number, message=_prepared(message, limits)
            )
        )
    return events


# --- batch operations (docs/behaviours.md §4) ------------------------------------------------


async def decide_batch_operation(
    state: ConversationState, operation: BatchOperation, limits: Limits
) -> list[DomainEvent]:
    """The events of a batch operation: a `BatchStarted`, and the messages
    it adds (a start_batch summary, inserted messages) in the new batch.

    `operation` has checked itself (`store.domain.operations`); what needs the
    conversation is checked here, and refused with InvalidOperation (or
    BoundaryError, InvalidMessage) before anything is decided."""
    match operation:
        case StartBatch():
            return await _start_batch(state, operation, limits)
        case Truncate() | Filter() | Clear():
            window = await state.window(operation.agent_id)
            event, _ = await _new_batch(
                state, operation, win.select(window, operation), window, adjust=operation.adjust
            )
            return [event]
        case Insert():
            return await _insert(state, operation, limits)
        case RollbackToBatch():
            return await _rollback(state, operation)
        case _:
            assert_never(operation)


async def _new_batch(
    state: ConversationState,
    operation: BatchOperation,
    selected: Sequence[win.WindowEntry],
    window: Sequence[win.WindowEntry],
    *,
    adjust: bool,
    summary_seq: int | None = None,
) -> tuple[BatchStarted, Head]:
    agent = operation.agent_id
    checked = win.enforce_tool_blocks(
        window, selected, pending_call_ids=await state.pending_call_ids(agent), adjust=adjust
    )
    head = await state.head()
    definition = win.selection_to_batch(window, checked, next_seq=head.next_seq)
    event = BatchStarted(
        batch=head.last_batch + 1,
        boundary=definition.boundary,
        retained=definition.retained,
        summary_seq=summary_seq,
        operation=operation.operation,
        parameters=operation.parameters(),
        agent_id=agent,
        source=head.batch_of(agent),
    )
    return event, head.moved(agent, event.batch)


async def _start_batch(
    state: ConversationState, operation: StartBatch, limits: Limits
) -> list[DomainEvent]:
    """A new batch from `boundary_seq` on, optionally led by a summary
    message (appended now, shown just before the boundary)."""
    head = await state.head()
    if operation.boundary_seq > head.next_seq:
        raise InvalidOperation(
            f"start_batch boundary_seq {operation.boundary_seq} is past the end of the "
            f"conversation: it must be between 1 and {head.next_seq} (the next message's seq)"
        )
    window = await state.window(operation.agent_id)
    selected = win.select(window, operation)
    summary = operation.summary
    summary_seq = head.next_seq if summary is not None else None
    event, new_head = await _new_batch(
        state, operation, selected, window, adjust=operation.adjust, summary_seq=summary_seq
    )
    events: list[DomainEvent] = [event]
    if summary is not None:
        (summary,) = _of_agent([summary], operation.agent_id)
        summary = summary.model_copy(update={"kind": MessageKind.SUMMARY})
        tail = [e for e in window if e.sort_key >= event.boundary]
        key = await _keys_before(state, tail[0].sort_key, 1) if tail else [Decimal(head.next_seq)]
        events += await append_messages(
            state, [summary], limits, sort_keys=key, batch=event.batch, head=new_head
        )
    return events


def _of_agent(messages: Sequence[Message], agent_id: str) -> list[Message]:
    """`messages` as messages of `agent_id`, whose window an operation
    adds them to; one that names another agent is refused."""
    owned = []
    for i, message in enumerate(messages):
        if message.agent_id != agent_id:
            if "agent_id" in message.model_fields_set:
                raise InvalidMessage(
                    f"this message is agent {message.agent_id!r}'s, but the operation adds "
                    f"it to agent {agent_id!r}'s window",
                    index=i,
                    client_id=message.client_message_id,
                )
            message = message.model_copy(update={"agent_id": agent_id})
        owned.append(message)
    return owned


async def _keys_before(state: ConversationState, key: Decimal, count: int) -> list[Decimal]:
    low = await state.key_before(key) or Decimal(0)
    return win.keys_between(low, key, count)


async def _insert(state: ConversationState, operation: Insert, limits: Limits) -> list[DomainEvent]:
    """Place new messages at `position` of the visible window, in a new batch.

    The log stays append-only: the messages get the next sequence numbers,
    and sort keys that put them where they were asked for.
    """
    position, agent = operation.position, operation.agent_id
    messages = _of_agent(operation.messages, agent)
    window = await state.window(agent)
    if position > len(window):
        raise InvalidOperation(
            f"insert position {position} is outside the window (0..{len(window)})"
        )
    for i, message in enumerate(messages):
        # A message rule, reported as one (naming the message's index and
        # client id) like every other.
        if message.tool_calls or message.role == "tool":
            raise InvalidMessage(
                "tool calls and tool results cannot be inserted; append them instead",
                index=i,
                client_id=message.client_message_id,
            )
    before = window[position - 1] if position > 0 else None
    after = window[position] if position < len(window) else None
    if after is not None and after.answers is not None:
        # Results follow their call: a result right after the point means
        # the point is inside a tool-call block.
        raise InvalidOperation(f"insert position {position} is inside a tool-call block")
    waiting = _waiting_calls_of_block(window, before, await state.pending_call_ids(agent))
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
    event, new_head = await _new_batch(state, operation, window, window, adjust=False)
    appended = await append_messages(
        state, messages, limits, sort_keys=keys, batch=event.batch, head=new_head
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


async def _rollback(state: ConversationState, operation: RollbackToBatch) -> list[DomainEvent]:
    """Make batch k's view current again, as a new batch."""
    batch, agent = operation.batch, operation.agent_id
    source = await state.batch_window(batch, agent)
    if source is None:
        last = (await state.head()).last_batch
        if batch > last:
            raise InvalidOperation(
                f"there is no batch {batch} to roll back to: batches are 1..{last}"
            )
        raise InvalidOperation(
            f"batch {batch} is another agent's window, not agent {agent!r}'s: "
            "an agent rolls back to one of its own batches (or one of every agent's)"
        )
    shown_calls = {c for e in source for c in e.call_ids}
    hidden = sorted(await state.pending_call_ids(agent) - shown_calls)
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
            batch=head.last_batch + 1,
            boundary=definition.boundary,
            retained=definition.retained,
            operation=operation.operation,
            parameters=operation.parameters(),
            agent_id=agent,
            source=batch,
        )
    ]


# --- other commands -----------------------------------------------------------------


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


async def pin_message(state: ConversationState, seq: int, pinned: bool) -> list[DomainEvent]:
    """Pin (or unpin) a message; no event when it already is (or is not)."""
    message = await state.message(seq)
    if message is None:
        raise InvalidOperation(f"there is no message with seq {seq}")
    if message.pinned == pinned:
        return []
    return [MessagePinned(seq=seq, pinned=pinned)]


def configure_agent(profile: AgentProfile) -> list[DomainEvent]:
    if profile.is_sub_agent and profile.agent_id == "main":
        raise InvalidOperation("the main agent cannot be configured as a sub-agent")
    return [AgentConfigured(profile=profile)]


def update_slot(
    agent_id: str, slot: str, value: str | Sequence[TodoItem] | None
) -> list[DomainEvent]:
    check_slot(agent_id, slot, value)
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


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7396): an object patch merges key by key, a
    null removes its key, anything else replaces the value whole."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _same_json(a: Any, b: Any) -> bool:
    # Not `a == b`: Python holds 1 == 1.0 == True, JSON does not.
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def change_metadata(
    current: dict[str, Any], patch: dict[str, Any], *, replace: bool = False
) -> list[DomainEvent]:
    """The conversation's new metadata: `patch` merged into `current` (or,
    with `replace`, `patch` itself, nulls dropped); no event when nothing changes.
    The result is held to the metadata limits (`store.domain.inputs`)."""
    metadata = merge_patch({} if replace else current, patch)
    if _same_json(metadata, current):
        return []
    try:
        return [ConversationMetadataChanged(metadata=metadata)]
    except ValidationError as error:
        raise InvalidOperation(f"invalid metadata: {error.errors()[0]['msg']}") from None
