"""An in-memory `Repository`, shipped for users' own tests: no database, the
same behaviour as `store.postgres.PostgresRepository`.

    from store.testing import InMemoryRepository

    async def test_agent_keeps_the_question() -> None:
        repository = InMemoryRepository()
        conversation = await repository.create_conversation()
        await repository.append_messages(
            conversation.id, [{"role": "user", "content": "What is 2 + 2?"}]
        )
        window = await repository.visible_window(conversation.id)
        assert [(m.seq, m.role) for m in window] == [(1, "user")]

What it owns: per conversation, the list of domain events (with their
versions) and Python projections that mirror the PostgreSQL views of
`store.projections` (messages, per-role ordinals, batches and their members,
tool calls, agent profiles, context slots, the head).

Every write is decided by the same `store.commands` functions the
PostgreSQL repository calls, against `_MemoryState`, a `ConversationState`
over those dicts; the events are then applied by `_project`, which mirrors
`store.projections.apply` event by event. A decision is therefore made by
one piece of code for both backends, and the contract suite in
`tests/contract` checks that they agree on everything else (errors,
versions, idempotency, reads). Where the PostgreSQL behaviour is debatable,
the fake copies it rather than improves it.

Writers are serialised by one `asyncio.Lock` per storage, as the stream row
lock serialises them in PostgreSQL, so concurrent tasks get the same
`ConcurrencyConflict`s. `repository.for_tenant("other")` gives another
tenant's repository over the same storage, for tenant-isolation tests.
"""

from __future__ import annotations

import asyncio
import bisect
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from store import commands
from store.command_methods import CommandMethods, Decide
from store.commands import ConversationState, Head
from store.context import (
    ROLE_DEFINITION,
    AgentProfile,
    ContextSlots,
    default_profile,
    slots_from_values,
)
from store.errors import (
    ConversationDeleted,
    ConversationNotFound,
    IdempotencyConflict,
    InvalidOperation,
)
from store.events import (
    AgentConfigured,
    BatchStarted,
    ContextSlotUpdated,
    ConversationArchived,
    ConversationStarted,
    DomainEvent,
    MessageAppended,
    MessageEdited,
)
from store.events import (
    ConversationDeleted as ConversationDeletedEvent,
)
from store.idempotency import client_ids, replay_by_client_ids
from store.idempotency import request_hash as append_request_hash
from store.log import check_expected
from store.messages import MAIN_AGENT, ROLES, Message, Role, StoredMessage
from store.records import ExpectedVersion, StreamState
from store.repository import Appended, Batch, BatchResult, Conversation, Scope, ToolBlock
from store.schema import DEFAULT_TENANT
from store.validation import CallState, parse_message
from store.window import WindowEntry

if TYPE_CHECKING:
    from store.assembler import Assembly

__all__ = ["InMemoryRepository"]

ANY = StreamState.ANY

# PostgreSQL keeps JSON in JSONB columns; storing the same JSON here means a
# read returns what PostgreSQL would return (tuples come back as lists, ...).
_JSON_OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


def _as_json(value: dict[str, Any]) -> dict[str, Any]:
    as_json: dict[str, Any] = _JSON_OBJECT.dump_python(value, mode="json")
    return as_json


# --- rows: one dataclass per PostgreSQL view row ------------------------------


@dataclass(kw_only=True)
class _MessageRow:
    """A row of `messages`: the message's JSON body plus filter columns."""

    seq: int
    sort_key: Decimal
    role: Role
    agent_id: str
    batch: int
    role_ordinal: int
    body: dict[str, Any]
    text: str
    tool_call_id: str | None
    recorded_at: datetime
    edited_at: datetime | None = None

    def stored(self) -> StoredMessage:
        return StoredMessage.model_validate(
            {
                **self.body,
                "seq": self.seq,
                "batch": self.batch,
                "role_ordinal": self.role_ordinal,
                "recorded_at": self.recorded_at,
                "edited": self.edited_at is not None,
            }
        )

    def window_entry(self) -> WindowEntry:
        return WindowEntry(
            seq=self.seq,
            sort_key=self.sort_key,
            role=self.role,
            agent_id=self.agent_id,
            text=self.text,
            call_ids=tuple(c["id"] for c in self.body.get("tool_calls") or ()),
            answers=self.tool_call_id,
        )


@dataclass(frozen=True, kw_only=True)
class _Member:
    """A row of `batch_members`: a batch shows this message at this key."""

    sort_key: Decimal
    seq: int
    role: Role
    agent_id: str


@dataclass(kw_only=True)
class _ToolCallRow:
    call_id: str
    agent_id: str
    tool_name: str
    arguments: dict[str, Any]
    assistant_seq: int
    result_seq: int | None = None
    status: str = "pending"
    is_error: bool = False

    def block(self) -> ToolBlock:
        return ToolBlock(
            call_id=self.call_id,
            tool_name=self.tool_name,
            arguments=self.arguments,
            agent_id=self.agent_id,
            assistant_seq=self.assistant_seq,
            result_seq=self.result_seq,
            status="complete" if self.status == "complete" else "pending",
            is_error=self.is_error,
        )


@dataclass(kw_only=True)
class _Views:
    """Every projection of one conversation (PostgreSQL: one row set per
    table). Created by `ConversationStarted`, dropped by the deletion."""

    tenant: str
    started_at: datetime
    metadata: dict[str, Any]
    next_seq: int = 1
    current_batch: int = 1
    archived: bool = False
    messages: dict[int, _MessageRow] = field(default_factory=dict)
    # Every message's sort key, sorted: the neighbour look-ups of `insert`.
    sort_keys: list[Decimal] = field(default_factory=list)
    # role -> seqs in arrival order: the n-th is the role's ordinal n.
    role_index: dict[str, list[int]] = field(default_factory=lambda: {r: [] for r in ROLES})
    batches: dict[int, Batch] = field(default_factory=dict)
    members: dict[int, list[_Member]] = field(default_factory=dict)
    tool_calls: dict[str, _ToolCallRow] = field(default_factory=dict)
    profiles: dict[str, AgentProfile] = field(default_factory=dict)
    slots: dict[str, dict[str, Any]] = field(default_factory=dict)

    def window(self, batch: int) -> list[_MessageRow]:
        return [self.messages[m.seq] for m in self.members.get(batch, ())]


@dataclass(frozen=True, kw_only=True)
class _RecordedEvent:
    version: int
    event: DomainEvent
    client_id: str | None
    recorded_at: datetime


@dataclass(frozen=True, kw_only=True)
class _Request:
    """A row of `append_requests`: what an idempotency key wrote."""

    request_hash: str
    first_version: int
    last_version: int


@dataclass(kw_only=True)
class _Stream:
    """A conversation: its `conversations` row, its events, its requests,
    and its views. A deleted one stays as a tombstone with no views."""

    id: uuid.UUID
    tenant: str
    version: int = 0
    deleted: bool = False
    events: list[_RecordedEvent] = field(default_factory=list)
    client_ids: set[str] = field(default_factory=set)
    requests: dict[str, _Request] = field(default_factory=dict)
    views: _Views | None = None

    @property
    def live_views(self) -> _Views:
        assert self.views is not None, "a live conversation has views"
        return self.views


class _Storage:
    """What tenants' repositories share: the streams, and the lock that
    serialises writers as the stream row lock does in PostgreSQL."""

    def __init__(self) -> None:
        self.streams: dict[uuid.UUID, _Stream] = {}
        self.lock = asyncio.Lock()


# --- the projector: store.projections, in Python --------------------------------


def _project(stream: _Stream, recorded: _RecordedEvent) -> None:
    """Apply one recorded event to the views, as `store.projections.apply.project`."""
    event = recorded.event
    at = recorded.recorded_at
    if isinstance(event, ConversationStarted):
        stream.views = _start_views(event, at)
        return
    if isinstance(event, ConversationDeletedEvent):
        stream.views = None
        return
    views = stream.live_views
    match event:
        case MessageAppended():
            _append_message(views, event, at)
            _track_tool_calls(views, event)
        case MessageEdited():
            _edit_message(views, event, at)
        case BatchStarted():
            _start_batch(views, event, at)
        case AgentConfigured():
            views.profiles[event.profile.agent_id] = event.profile
        case ContextSlotUpdated():
            _update_slot(views, event)
        case ConversationArchived():
            views.archived = True


def _start_views(event: ConversationStarted, at: datetime) -> _Views:
    views = _Views(tenant=event.tenant, started_at=at, metadata=_as_json(event.metadata))
    views.batches[1] = Batch(
        number=1,
        boundary=Decimal(0),
        summary_seq=None,
        retained=(),
        operation="conversation_started",
        parameters={},
        started_at=at,
    )
    views.members[1] = []
    return views


def _append_message(views: _Views, event: MessageAppended, at: datetime) -> None:
    message = event.message
    seqs_of_role = views.role_index[message.role]
    seqs_of_role.append(event.seq)
    views.messages[event.seq] = _MessageRow(
        seq=event.seq,
        sort_key=event.sort_key,
        role=message.role,
        agent_id=message.agent_id,
        batch=event.batch,
        role_ordinal=len(seqs_of_role),
        body=message.model_dump(mode="json"),
        text=message.text,
        tool_call_id=message.tool_call_id,
        recorded_at=at,
    )
    bisect.insort(views.sort_keys, event.sort_key)
    # Every message joins the batch current when it arrives.
    member = _Member(
        sort_key=event.sort_key, seq=event.seq, role=message.role, agent_id=message.agent_id
    )
    bisect.insort(views.members.setdefault(event.batch, []), member, key=lambda m: m.sort_key)
    views.next_seq = max(views.next_seq, event.seq + 1)


def _track_tool_calls(views: _Views, event: MessageAppended) -> None:
    message = event.message
    for call in message.tool_calls:
        views.tool_calls[call.id] = _ToolCallRow(
            call_id=call.id,
            agent_id=message.agent_id,
            tool_name=call.name,
            arguments=_as_json(call.arguments),
            assistant_seq=event.seq,
        )
    if message.tool_call_id is None:
        return
    answered = views.tool_calls.get(message.tool_call_id)
    if answered is not None:
        answered.result_seq = event.seq
        answered.status = "complete"
        answered.is_error = message.is_error


def _edit_message(views: _Views, event: MessageEdited, at: datetime) -> None:
    row = views.messages[event.seq]
    edited = Message.model_validate(
        {**row.body, "content": event.content, "token_estimate": event.token_estimate}
    )
    row.body = edited.model_dump(mode="json")
    row.text = edited.text
    row.edited_at = at


def _start_batch(views: _Views, event: BatchStarted, at: datetime) -> None:
    source = event.source_batch
    views.batches[event.batch] = Batch(
        number=event.batch,
        boundary=event.boundary,
        summary_seq=event.summary_seq,
        retained=tuple(event.retained),
        operation=event.operation,
        parameters=_as_json(event.parameters),
        started_at=at,
    )
    # Out of the source batch's window: the tail from the boundary on, and
    # the retained messages (the summary joins when it is appended).
    retained = set(event.retained)
    views.members[event.batch] = [
        m
        for m in views.members.get(source, ())
        if m.sort_key >= event.boundary or m.seq in retained
    ]
    views.current_batch = event.batch


def _update_slot(views: _Views, event: ContextSlotUpdated) -> None:
    if event.slot == ROLE_DEFINITION:
        # The role definition is part of the agent's profile: a slot update
        # of it is the same fact as configuring it.
        profile = views.profiles.get(event.agent_id) or AgentProfile(
            agent_id=event.agent_id, is_sub_agent=event.agent_id != MAIN_AGENT
        )
        views.profiles[event.agent_id] = profile.model_copy(update={"role_definition": event.text})
        return
    slots = views.slots.setdefault(event.agent_id, {})
    value: Any = (
        [item.model_dump(mode="json") for item in event.todo]
        if event.todo is not None
        else event.text
    )
    if value is None:
        slots.pop(event.slot, None)
    else:
        slots[event.slot] = value


# --- the state port: what a command may read ------------------------------------


class _MemoryState:
    """`ConversationState` over one conversation's views. Commands only
    read it; the events they return are applied afterwards."""

    def __init__(self, stream: _Stream) -> None:
        self.conversation_id = stream.id
        self._views = stream.live_views

    async def head(self) -> Head:
        return Head(next_seq=self._views.next_seq, current_batch=self._views.current_batch)

    async def calls(self, call_ids: set[str]) -> dict[str, CallState]:
        rows = (self._views.tool_calls.get(i) for i in call_ids)
        return {
            r.call_id: CallState(agent_id=r.agent_id, answered=r.status == "complete")
            for r in rows
            if r is not None
        }

    async def pending_call_ids(self) -> set[str]:
        return {r.call_id for r in self._views.tool_calls.values() if r.status == "pending"}

    async def window(self) -> list[WindowEntry]:
        return [r.window_entry() for r in self._views.window(self._views.current_batch)]

    async def batch_window(self, batch: int) -> list[WindowEntry] | None:
        if batch not in self._views.batches:
            return None
        return [r.window_entry() for r in self._views.window(batch)]

    async def key_after(self, key: Decimal) -> Decimal | None:
        keys = self._views.sort_keys
        i = bisect.bisect_right(keys, key)
        return keys[i] if i < len(keys) else None

    async def key_before(self, key: Decimal) -> Decimal | None:
        keys = self._views.sort_keys
        i = bisect.bisect_left(keys, key)
        return keys[i - 1] if i > 0 else None

    async def message(self, seq: int) -> StoredMessage | None:
        row = self._views.messages.get(seq)
        return None if row is None else row.stored()


# --- the repository -------------------------------------------------------------


def _client_id(event: DomainEvent) -> str | None:
    return event.message.client_message_id if isinstance(event, MessageAppended) else None


def _record(stream: _Stream, domain_events: Sequence[DomainEvent]) -> list[_RecordedEvent]:
    """Append the events to the stream and apply them to its views.

    Everything that can refuse is checked before the first event is
    applied, so a refused write changes nothing (PostgreSQL: the
    transaction rolls back). Events of one write share one timestamp, as
    rows of one PostgreSQL transaction share `now()`.
    """
    client_ids = [c for c in map(_client_id, domain_events) if c is not None]
    if len(set(client_ids)) != len(client_ids) or stream.client_ids & set(client_ids):
        # PostgreSQL: a violation of `uq_events_client_id`, see store.log.
        raise IdempotencyConflict(
            ",".join(client_ids), "a client id in this append is already used by another event"
        )
    recorded_at = datetime.now(UTC)
    recorded = []
    for event in domain_events:
        stream.version += 1
        record = _RecordedEvent(
            version=stream.version,
            event=event,
            client_id=_client_id(event),
            recorded_at=recorded_at,
        )
        stream.events.append(record)
        _project(stream, record)
        recorded.append(record)
    stream.client_ids.update(client_ids)
    return recorded


class InMemoryRepository(CommandMethods):
    """`store.repository.Repository` in memory: same signatures, results
    and errors as `PostgresRepository`. Safe for concurrent asyncio tasks."""

    def __init__(
        self, *, tenant: str = DEFAULT_TENANT, limits: commands.Limits | None = None
    ) -> None:
        self.tenant = tenant
        self.limits = limits or commands.Limits()
        self._storage = _Storage()

    def for_tenant(
        self, tenant: str, *, limits: commands.Limits | None = None
    ) -> InMemoryRepository:
        """A repository of `tenant` over this one's storage, as a second
        `PostgresRepository` on the same engine: for tenant-isolation tests."""
        sibling = InMemoryRepository(tenant=tenant, limits=limits or self.limits)
        sibling._storage = self._storage
        return sibling

    # --- where a conversation is found -----------------------------------------

    def _stream_to_write(self, conversation_id: uuid.UUID) -> _Stream:
        """The stream a write may touch, checked as `store.log.lock_stream` does."""
        stream = self._storage.streams.get(conversation_id)
        if stream is None or stream.tenant != self.tenant:
            # Another tenant's conversation looks exactly like a missing one.
            raise ConversationNotFound(conversation_id)
        if stream.deleted:
            raise ConversationDeleted(conversation_id)
        return stream

    def _views_to_read(self, conversation_id: uuid.UUID) -> _Views:
        """The views a read may use; a purged conversation says so."""
        stream = self._storage.streams.get(conversation_id)
        if stream is None or stream.tenant != self.tenant:
            raise ConversationNotFound(conversation_id)
        if stream.deleted or stream.views is None:
            raise ConversationDeleted(conversation_id)
        return stream.views

    # --- the write path ---------------------------------------------------------

    async def _write(
        self, stream: _Stream, decide: Decide, expected_version: ExpectedVersion
    ) -> list[_RecordedEvent]:
        check_expected(stream.id, expected_version, stream.version)
        domain_events = await decide(_MemoryState(stream))
        return _record(stream, domain_events)

    async def _command(
        self, conversation_id: uuid.UUID, decide: Decide, expected_version: ExpectedVersion
    ) -> int:
        async with self._storage.lock:
            stream = self._stream_to_write(conversation_id)
            await self._write(stream, decide, expected_version)
            return stream.version

    async def _batch_command(
        self, conversation_id: uuid.UUID, decide: Decide, expected_version: ExpectedVersion
    ) -> BatchResult:
        async with self._storage.lock:
            stream = self._stream_to_write(conversation_id)
            await self._write(stream, decide, expected_version)
            views = stream.live_views
            return BatchResult(
                conversation_id=conversation_id,
                version=stream.version,
                batch=views.current_batch,
                visible=len(views.members[views.current_batch]),
            )

    # --- conversations -----------------------------------------------------------

    async def create_conversation(
        self, conversation_id: uuid.UUID | None = None, *, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        conversation_id = conversation_id or uuid.uuid4()
        started = ConversationStarted(tenant=self.tenant, metadata=metadata or {})
        async with self._storage.lock:
            if conversation_id in self._storage.streams:
                existing = self._stream_to_write(conversation_id)
                check_expected(conversation_id, StreamState.NO_STREAM, existing.version)
            stream = _Stream(id=conversation_id, tenant=self.tenant)
            _record(stream, [started])
            self._storage.streams[conversation_id] = stream
        return await self.get_conversation(conversation_id)

    async def get_conversation(self, conversation_id: uuid.UUID) -> Conversation:
        views = self._views_to_read(conversation_id)
        return Conversation(
            id=conversation_id,
            tenant=views.tenant,
            version=self._storage.streams[conversation_id].version,
            current_batch=views.current_batch,
            next_seq=views.next_seq,
            archived=views.archived,
            started_at=views.started_at,
            metadata=views.metadata,
        )

    async def archive(self, conversation_id: uuid.UUID) -> Conversation:
        async def decide(state: ConversationState) -> list[DomainEvent]:
            return [ConversationArchived()]

        await self._command(conversation_id, decide, ANY)
        return await self.get_conversation(conversation_id)

    async def delete(self, conversation_id: uuid.UUID) -> None:
        """Purge the conversation's events, requests and views; a tombstone
        (and one content-free event) remains, so the id cannot be reused."""
        async with self._storage.lock:
            stream = self._stream_to_write(conversation_id)
            stream.events.clear()
            stream.client_ids.clear()
            stream.requests.clear()
            _record(stream, [ConversationDeletedEvent()])
            stream.deleted = True

    # --- writes ------------------------------------------------------------------

    async def append_messages(
        self,
        conversation_id: uuid.UUID,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
        idempotency_key: str | None = None,
    ) -> Appended:
        parsed = [parse_message(m, i) for i, m in enumerate(messages)]
        request_hash = append_request_hash(parsed)

        async def decide(state: ConversationState) -> list[DomainEvent]:
            return await commands.append_messages(state, parsed, self.limits)

        async with self._storage.lock:
            stream = self._stream_to_write(conversation_id)
            # A retry is answered before the expected version is checked: the
            # first attempt already moved the version on.
            replay = self._find_replay(stream, parsed, idempotency_key, request_hash)
            if replay is not None:
                return Appended(
                    conversation_id=conversation_id,
                    version=stream.version,
                    messages=tuple(replay),
                    replayed=True,
                )
            recorded = await self._write(stream, decide, expected_version)
            if idempotency_key is not None:
                stream.requests[idempotency_key] = _Request(
                    request_hash=request_hash,
                    first_version=recorded[0].version,
                    last_version=recorded[-1].version,
                )
            views = stream.live_views
            seqs = sorted(r.event.seq for r in recorded if isinstance(r.event, MessageAppended))
            stored = tuple(views.messages[s].stored() for s in seqs)
            return Appended(
                conversation_id=conversation_id, version=stream.version, messages=stored
            )

    def _find_replay(
        self,
        stream: _Stream,
        parsed: Sequence[Message],
        idempotency_key: str | None,
        request_hash: str,
    ) -> list[StoredMessage] | None:
        """The messages an earlier identical append stored, if this is a retry."""
        if idempotency_key is not None:
            return self._replay_request(stream, idempotency_key, request_hash)
        ids = set(client_ids(parsed))
        if not ids:
            return None
        found = {
            cid: row.stored()
            for row in stream.live_views.messages.values()
            if (cid := row.body.get("client_message_id")) in ids
        }
        return replay_by_client_ids(parsed, found)

    def _replay_request(
        self, stream: _Stream, idempotency_key: str, request_hash: str
    ) -> list[StoredMessage] | None:
        request = stream.requests.get(idempotency_key)
        if request is None:
            return None
        if request.request_hash != request_hash:
            raise IdempotencyConflict(idempotency_key, "the request differs from the first one")
        views = stream.live_views
        return [
            views.messages[r.event.seq].stored()
            for r in stream.events
            if request.first_version <= r.version <= request.last_version
            and isinstance(r.event, MessageAppended)
        ]

    # --- reads ---------------------------------------------------------------------
    # Reads take no lock: none of them awaits, so each sees one consistent
    # state between two writes.

    async def visible_window(
        self, conversation_id: uuid.UUID, *, batch: int | None = None, agent_id: str | None = None
    ) -> list[StoredMessage]:
        views = self._views_to_read(conversation_id)
        number = views.current_batch if batch is None else batch
        return [
            row.stored()
            for row in views.window(number)
            if agent_id is None or row.agent_id == agent_id
        ]

    async def recent_by_role(
        self,
        conversation_id: uuid.UUID,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        if n < 0:
            raise InvalidOperation(f"recent_by_role needs n >= 0, got {n}")
        views = self._views_to_read(conversation_id)
        if scope == "history":
            candidates = [views.messages[s] for s in views.role_index.get(role, ())]
        else:
            candidates = [r for r in views.window(views.current_batch) if r.role == role]
        matching = [r for r in candidates if agent_id is None or r.agent_id == agent_id]
        return [r.stored() for r in matching[max(len(matching) - n, 0) :]] if n else []

    async def role_range(
        self, conversation_id: uuid.UUID, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        if first < 1 or last < first:
            raise InvalidOperation(f"role_range needs 1 <= first <= last, got {first}..{last}")
        views = self._views_to_read(conversation_id)
        seqs = views.role_index.get(role, [])[first - 1 : last]
        return [views.messages[s].stored() for s in seqs]

    async def count_by_role(
        self, conversation_id: uuid.UUID, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        views = self._views_to_read(conversation_id)
        if scope == "history":
            return {role: len(views.role_index[role]) for role in ROLES}
        members = views.members.get(views.current_batch, [])
        return {role: sum(m.role == role for m in members) for role in ROLES}

    async def tool_blocks(
        self, conversation_id: uuid.UUID, *, pending_only: bool = False, agent_id: str | None = None
    ) -> list[ToolBlock]:
        views = self._views_to_read(conversation_id)
        rows = sorted(views.tool_calls.values(), key=lambda r: (r.assistant_seq, r.call_id))
        return [
            r.block()
            for r in rows
            if (not pending_only or r.status == "pending")
            and (agent_id is None or r.agent_id == agent_id)
        ]

    async def batch_messages(self, conversation_id: uuid.UUID, batch: int) -> list[StoredMessage]:
        views = self._views_to_read(conversation_id)
        return [
            views.messages[seq].stored()
            for seq in sorted(views.messages)
            if views.messages[seq].batch == batch
        ]

    async def batches(self, conversation_id: uuid.UUID) -> list[Batch]:
        views = self._views_to_read(conversation_id)
        return [views.batches[n] for n in sorted(views.batches)]

    async def context_slots(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> ContextSlots:
        views = self._views_to_read(conversation_id)
        return slots_from_values(views.slots.get(agent_id, {}))

    async def agent_profile(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> AgentProfile:
        views = self._views_to_read(conversation_id)
        return views.profiles.get(agent_id) or default_profile(agent_id)

    async def assemble(
        self,
        conversation_id: uuid.UUID,
        *,
        agent_id: str = MAIN_AGENT,
        format: str = "openai-chat",
        options: Any = None,
    ) -> Assembly:
        """The payload of this agent's next LLM call, from its visible window
        and its context slots as they are now."""
        from store.assembler import assemble

        views = self._views_to_read(conversation_id)
        window = [r.stored() for r in views.window(views.current_batch) if r.agent_id == agent_id]
        return assemble(
            [m.as_message() for m in window],
            profile=views.profiles.get(agent_id) or default_profile(agent_id),
            slots=slots_from_values(views.slots.get(agent_id, {})),
            format=format,
            options=options,
        )
