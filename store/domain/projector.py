"""The projector: recorded domain events → the row changes of every view.

Pure and shared. The append path (inline, in the write's transaction) and
the rebuild (replaying the log) both turn events into `Step`s here, and a
storage only writes the rows it is given — so the two cannot differ, and the
in-memory fake and PostgreSQL cannot differ either (the storage port is in
`store.repository.port`).

What the projector tracks between events is the `ViewHead`: the next
sequence number, each agent's current batch (`current_batch`, the batch
every agent's window starts in, and `agent_batches`, the agents that have
a batch of their own), and how many messages of each role the
conversation has (a new message's role ordinal is that count + 1).

Steps keep the events' order: consecutive appended messages become one
`AppendMessages` step (a burst is written with one statement per table),
and every other event is a step of its own, because a batch copies its
source's membership as it is at that point of the log.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from store.domain.commands import Head
from store.domain.context import ROLE_DEFINITION
from store.domain.events import (
    AgentConfigured,
    BatchStarted,
    ContextSlotUpdated,
    ConversationArchived,
    ConversationForked,
    ConversationMetadataChanged,
    ConversationPurged,
    ConversationStarted,
    ConversationUnarchived,
    DomainEvent,
    MessageAppended,
    MessageEdited,
    MessagePinned,
)
from store.domain.messages import MAIN_AGENT, ROLES


@dataclass(frozen=True, kw_only=True)
class ViewHead:
    """Per conversation, what the next event's projection depends on."""

    next_seq: int = 1
    current_batch: int = 1
    role_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    # Agents whose window is in a batch of their own (every other agent's
    # is in `current_batch`).
    agent_batches: dict[str, int] = field(default_factory=dict)

    def for_decisions(self) -> Head:
        """The head as the decisions (`store.domain.commands`) see it."""
        return Head(
            next_seq=self.next_seq,
            current_batch=self.current_batch,
            agent_batches=self.agent_batches,
        )


# The per-message values below (and `store.repository.port.EventToWrite`) are plain
# dataclasses, not frozen ones: a frozen dataclass's `__init__` sets each
# field through `object.__setattr__`, more than twice the cost of a plain
# one (docs/storage.md, "Why the hot paths are written by hand"), and five
# such values are made per appended message. They are built for
# one write, read by a storage, then dropped; nothing changes them.


@dataclass(kw_only=True)
class Recorded:
    """A domain event with where and when the log recorded it."""

    version: int
    recorded_at: datetime
    event: DomainEvent


# --- rows ---------------------------------------------------------------------


@dataclass(kw_only=True)
class MessageRow:
    """A row of `messages` (its body stays in the event at `event_version`):
    also its role's index entry and its membership of the batch it arrived in."""

    seq: int
    sort_key: Decimal
    event_version: int
    batch: int
    role: str
    role_ordinal: int
    agent_id: str
    kind: str
    tool_call_id: str | None
    is_error: bool
    client_message_id: str | None
    token_estimate: int


@dataclass(kw_only=True)
class CallRow:
    """A new tool call; answered already when its result came in the same run."""

    call_id: str
    agent_id: str
    tool_name: str
    assistant_seq: int
    result_seq: int | None = None
    is_error: bool = False


@dataclass(kw_only=True)
class CallAnswered:
    call_id: str
    result_seq: int
    is_error: bool


# --- steps --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StartViews:
    """`ConversationStarted`: batch 1, empty; the head at its start."""

    started_at: datetime
    version: int
    metadata: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class AppendMessages:
    """A run of appended messages: message rows (each also its role's index
    entry and its membership of the batch it arrived in), new calls, and the answers to
    calls made before the run (a call answered within the run is written
    answered: one write per row, whatever order a storage writes in)."""

    messages: tuple[MessageRow, ...]
    calls: tuple[CallRow, ...]
    answered: tuple[CallAnswered, ...]


@dataclass(frozen=True, kw_only=True)
class EditMessage:
    seq: int
    edit_version: int
    token_estimate: int


@dataclass(frozen=True, kw_only=True)
class PinMessage:
    seq: int
    pinned: bool


@dataclass(frozen=True, kw_only=True)
class StartBatch:
    """A new batch: its row, and its members copied from `source_batch`'s
    (the tail from `boundary` on, and the retained messages) — only
    `agent_id`'s messages, when it is one agent's window."""

    agent_id: str | None
    batch: int
    source_batch: int
    # The batch the window was in until now: the source, except for a
    # rollback, which selects from an older batch.
    left_batch: int
    boundary: Decimal
    summary_seq: int | None
    retained: tuple[int, ...]
    operation: str
    parameters: dict[str, Any]
    started_at: datetime
    version: int


@dataclass(frozen=True, kw_only=True)
class ConfigureAgent:
    """An upsert of an agent profile; `role_definition_only` sets just that
    column (a slot update of the role definition), creating the row if needed."""

    agent_id: str
    is_sub_agent: bool
    system_prompt: str | None
    role_definition: str | None
    role_definition_only: bool
    version: int


@dataclass(frozen=True, kw_only=True)
class SetSlot:
    """A context slot's new value; None removes it."""

    agent_id: str
    slot: str
    value: Any
    version: int


@dataclass(frozen=True, kw_only=True)
class Archive:
    """Archived at `archived_at`; None: unarchived."""

    archived_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class SetMetadata:
    """The conversation's metadata, whole."""

    metadata: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class PurgeViews:
    """`ConversationPurged`: every view row of the conversation goes."""


@dataclass(frozen=True, kw_only=True)
class CopyForked:
    """A fork's messages, copied from its parent in one set-based write:
    the parent's messages up to `up_to_seq` (of `agent_id`, if given), as
    they read now, become `message_appended` events of the fork from
    `first_version` on (in seq order; then a `message_pinned` event per
    pinned one) and the rows `project` would derive from those events —
    all in batch 1. Never made by `project`: the repository's fork adds it
    after the `ConversationForked` step, and a rebuild replays the copied
    events instead (tests/integration/test_forks.py checks they agree)."""

    parent: uuid.UUID
    up_to_seq: int
    agent_id: str | None
    first_version: int
    messages: int


Step = (
    StartViews
    | AppendMessages
    | EditMessage
    | StartBatch
    | ConfigureAgent
    | SetSlot
    | Archive
    | SetMetadata
    | PurgeViews
    | PinMessage
    | CopyForked
)


@dataclass(frozen=True, kw_only=True)
class Changes:
    """What a run of events does to the views: steps in log order, and the
    head after them (the storage writes `head.next_seq`/`current_batch`)."""

    steps: tuple[Step, ...]
    head: ViewHead


# --- the projector ------------------------------------------------------------


def project(head: ViewHead, recorded: Iterable[Recorded]) -> Changes:
    """The changes `recorded` makes to views that are at `head`."""
    steps: list[Step] = []
    run: list[MessageAppended] = []
    run_versions: list[int] = []
    counts = dict(head.role_counts)
    next_seq, current_batch = head.next_seq, head.current_batch
    agent_batches = dict(head.agent_batches)

    def flush() -> None:
        if run:
            steps.append(_append_step(run, run_versions, counts))
            run.clear()
            run_versions.clear()

    for item in recorded:
        event = item.event
        if isinstance(event, MessageAppended):
            run.append(event)
            run_versions.append(item.version)
            next_seq = max(next_seq, event.seq + 1)
            continue
        flush()
        match event:
            case ConversationStarted() | ConversationForked():
                # A fork starts as a new conversation; its messages follow
                # in its log.
                steps.append(
                    StartViews(
                        started_at=item.recorded_at, version=item.version, metadata=event.metadata
                    )
                )
                counts = dict.fromkeys(ROLES, 0)
                next_seq, current_batch = 1, 1
                agent_batches = {}
            case MessageEdited():
                steps.append(
                    EditMessage(
                        seq=event.seq,
                        edit_version=item.version,
                        token_estimate=event.token_estimate or 0,
                    )
                )
            case BatchStarted():
                steps.append(
                    StartBatch(
                        agent_id=event.agent_id,
                        batch=event.batch,
                        source_batch=event.source_batch,
                        left_batch=current_batch
                        if event.agent_id is None
                        else agent_batches.get(event.agent_id, current_batch),
                        boundary=event.boundary,
                        summary_seq=event.summary_seq,
                        retained=tuple(event.retained),
                        operation=event.operation,
                        parameters=event.parameters,
                        started_at=item.recorded_at,
                        version=item.version,
                    )
                )
                if event.agent_id is None:
                    # Recorded before windows were per agent: every agent's.
                    current_batch, agent_batches = event.batch, {}
                else:
                    agent_batches[event.agent_id] = event.batch
            case MessagePinned():
                steps.append(PinMessage(seq=event.seq, pinned=event.pinned))
            case AgentConfigured():
                profile = event.profile
                steps.append(
                    ConfigureAgent(
                        agent_id=profile.agent_id,
                        is_sub_agent=profile.is_sub_agent,
                        system_prompt=profile.system_prompt,
                        role_definition=profile.role_definition,
                        role_definition_only=False,
                        version=item.version,
                    )
                )
            case ContextSlotUpdated():
                steps.append(_slot_step(event, item.version))
            case ConversationArchived():
                steps.append(Archive(archived_at=item.recorded_at))
            case ConversationUnarchived():
                steps.append(Archive(archived_at=None))
            case ConversationMetadataChanged():
                steps.append(SetMetadata(metadata=event.metadata))
            case ConversationPurged():
                steps.append(PurgeViews())
                counts = dict.fromkeys(ROLES, 0)
                next_seq, current_batch = 1, 1
                agent_batches = {}
    flush()
    return Changes(
        steps=tuple(steps),
        # Every field anew, so built directly: `dataclasses.replace` reads
        # the class's fields on every call, once per append.
        head=ViewHead(
            next_seq=next_seq,
            current_batch=current_batch,
            role_counts=counts,
            agent_batches=agent_batches,
        ),
    )


def _append_step(
    run: Sequence[MessageAppended], versions: Sequence[int], counts: dict[str, int]
) -> AppendMessages:
    rows: list[MessageRow] = []
    calls: list[CallRow] = []
    answered: list[CallAnswered] = []
    for event, version in zip(run, versions, strict=True):
        message = event.message
        counts[message.role] += 1
        rows.append(
            MessageRow(
                seq=event.seq,
                sort_key=event.sort_key,
                event_version=version,
                batch=event.batch,
                role=message.role,
                role_ordinal=counts[message.role],
                agent_id=message.agent_id,
                kind=message.kind.value,
                tool_call_id=message.tool_call_id,
                is_error=message.is_error,
                client_message_id=message.client_message_id,
                token_estimate=message.token_estimate or 0,
            )
        )
        calls.extend(
            CallRow(
                call_id=call.id,
                agent_id=message.agent_id,
                tool_name=call.name,
                assistant_seq=event.seq,
            )
            for call in message.tool_calls
        )
        if message.tool_call_id is not None:
            answered.append(
                CallAnswered(
                    call_id=message.tool_call_id, result_seq=event.seq, is_error=message.is_error
                )
            )
    answers = {a.call_id: a for a in answered}
    calls = [
        replace(c, result_seq=answers[c.call_id].result_seq, is_error=answers[c.call_id].is_error)
        if c.call_id in answers
        else c
        for c in calls
    ]
    new = {c.call_id for c in calls}
    return AppendMessages(
        messages=tuple(rows),
        calls=tuple(calls),
        answered=tuple(a for a in answered if a.call_id not in new),
    )


def _slot_step(event: ContextSlotUpdated, version: int) -> Step:
    if event.slot == ROLE_DEFINITION:
        # The role definition is part of the agent's profile: a slot update
        # of it is the same fact as configuring it.
        return ConfigureAgent(
            agent_id=event.agent_id,
            is_sub_agent=event.agent_id != MAIN_AGENT,
            system_prompt=None,
            role_definition=event.text,
            role_definition_only=True,
            version=version,
        )
    value: Any = (
        [item.model_dump(mode="json") for item in event.todo]
        if event.todo is not None
        else event.text
    )
    return SetSlot(agent_id=event.agent_id, slot=event.slot, value=value, version=version)
