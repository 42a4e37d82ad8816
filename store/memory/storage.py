"""An in-memory storage, shipped for users' own tests: no database, the
same repository.

    from store.memory import InMemoryRepository

    async def test_agent_keeps_the_question() -> None:
        repository = InMemoryRepository()
        conversation = await repository.create_conversation()
        await repository.append_messages(
            conversation.id, [{"role": "user", "content": "What is 2 + 2?"}]
        )
        window = await repository.visible_window(conversation.id)
        assert [(m.seq, m.role) for m in window] == [(1, "user")]

`MemoryStorage` implements the storage port (`store.repository.port`) over dicts
that mirror the PostgreSQL tables, one short method per named operation;
everything above the port — the repository's orchestration, the commands'
decisions, the projector — is the same code that runs on PostgreSQL. The
contract suite in tests/contract runs against both.

Writers are serialised per conversation by an `asyncio.Lock`, as the
stream row lock serialises them in PostgreSQL, so concurrent tasks get the
same `ConcurrencyConflict`s. A write applies nothing until `write()`, and
checks everything that could refuse before it changes anything: a refused
write leaves no trace, as a rolled-back transaction.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import json
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pydantic import TypeAdapter

from store.domain.codec import StoredWindow, decode_stored, message_text
from store.domain.commands import Head, Limits
from store.domain.context import AgentProfile, ContextSlots, default_profile, slots_from_values
from store.domain.errors import ConversationDeleted, ConversationNotFound, InvalidOperation
from store.domain.events import from_data
from store.domain.feed import ChangedConversation, FeedEvent, FeedPage, checkpoint, scan_limit
from store.domain.listing import ConversationCursor, ConversationQuery, Listed, json_contains
from store.domain.messages import MAIN_AGENT, ROLES, Role, StoredMessage
from store.domain.projector import (
    AppendMessages,
    Archive,
    Changes,
    ConfigureAgent,
    CopyForked,
    EditMessage,
    MessageRow,
    PinMessage,
    PurgeViews,
    Recorded,
    SetMetadata,
    SetSlot,
    StartBatch,
    StartViews,
    ViewHead,
    project,
)
from store.domain.records import FeedPosition, RecordedEvent
from store.domain.search import Candidate, SearchPage, SearchQuery, search_candidates
from store.domain.validation import CallState
from store.domain.values import Batch, Conversation, ToolBlock
from store.domain.window import WindowEntry
from store.repository import DEFAULT_TENANT, Repository
from store.repository.port import (
    NO_LOOKUPS,
    AssemblyInput,
    CandidateCursor,
    CandidateQuery,
    CompactionCandidate,
    ForkSource,
    HistoryPage,
    Lookups,
    StoredRequest,
    StreamRow,
    WindowPage,
    Write,
    fork_windows,
)

__all__ = ["InMemoryRepository", "MemoryStorage"]

# PostgreSQL keeps JSON in JSONB columns; storing the same JSON here means a
# read returns what PostgreSQL would return (tuples come back as lists, ...).
_JSON: TypeAdapter[Any] = TypeAdapter(Any)


def _as_json(value: Any) -> Any:
    return _JSON.dump_python(value, mode="json")


# --- rows: one per PostgreSQL table row ------------------------------------------


@dataclass(kw_only=True)
class _StreamRow:
    """A row of `conversations`: the stream, and the head the views keep."""

    tenant: str
    key: str
    created_at: datetime
    updated_at: datetime
    version: int = 0
    archived_at: datetime | None = None
    deleted_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    next_seq: int = 1
    current_batch: int = 1
    agent_batches: dict[str, int] = field(default_factory=dict)

    def batch_of(self, agent_id: str) -> int:
        return self.agent_batches.get(agent_id, self.current_batch)


@dataclass(frozen=True, kw_only=True)
class _EventRow:
    position: int
    version: int
    type: str
    data: dict[str, Any]
    recorded_at: datetime
    transaction_id: int


@dataclass(kw_only=True)
class _Call:
    agent_id: str
    tool_name: str
    assistant_seq: int
    result_seq: int | None = None
    is_error: bool = False


@dataclass(kw_only=True)
class _Views:
    """Every view row of one conversation."""

    messages: dict[int, MessageRow] = field(default_factory=dict)
    edits: dict[int, int] = field(default_factory=dict)  # seq → edit event version
    sort_keys: list[Decimal] = field(default_factory=list)  # every message's, sorted
    role_index: dict[str, list[int]] = field(default_factory=lambda: {r: [] for r in ROLES})
    members: dict[int, list[tuple[Decimal, int]]] = field(default_factory=dict)
    batches: dict[int, Batch] = field(default_factory=dict)
    batch_versions: dict[int, int] = field(default_factory=dict)  # batch → its event's version
    calls: dict[str, _Call] = field(default_factory=dict)
    profiles: dict[str, AgentProfile] = field(default_factory=dict)
    slots: dict[str, dict[str, Any]] = field(default_factory=dict)
    client_ids: dict[str, int] = field(default_factory=dict)  # client id → seq
    pinned: set[int] = field(default_factory=set)


class _Tables:
    def __init__(self) -> None:
        self.streams: dict[uuid.UUID, _StreamRow] = {}
        self.events: dict[uuid.UUID, list[_EventRow]] = defaultdict(list)
        self.views: dict[uuid.UUID, _Views] = defaultdict(_Views)
        self.requests: dict[uuid.UUID, dict[str, StoredRequest]] = defaultdict(dict)
        self.positions = itertools.count(1)
        self.transactions = itertools.count(1)
        # Tailing readers wait on it (`wait_for_feed`); every write wakes them.
        self.feed_moved = asyncio.Condition()


# --- reading rows back ------------------------------------------------------------


def _stored(tables: _Tables, cid: uuid.UUID, seq: int) -> StoredMessage:
    views = tables.views[cid]
    row = views.messages[seq]
    event = _event(tables, cid, row.event_version)
    edit_version = views.edits.get(seq)
    edited = _event(tables, cid, edit_version).data["content"] if edit_version else None
    return decode_stored(
        event.data["message"],
        seq=seq,
        batch=row.batch,
        role_ordinal=row.role_ordinal,
        recorded_at=event.recorded_at,
        edited_content=edited,
        token_estimate=row.token_estimate,
        pinned=seq in views.pinned,
    )


def _event(tables: _Tables, cid: uuid.UUID, version: int) -> _EventRow:
    events = tables.events[cid]
    i = bisect.bisect_left(events, version, key=lambda e: e.version)
    return events[i]


def _window_entry(tables: _Tables, cid: uuid.UUID, sort_key: Decimal, seq: int) -> WindowEntry:
    views = tables.views[cid]
    row = views.messages[seq]
    body = _event(tables, cid, row.event_version).data["message"]
    edit_version = views.edits.get(seq)
    content = _event(tables, cid, edit_version).data["content"] if edit_version else None
    return WindowEntry(
        seq=seq,
        sort_key=sort_key,
        role=row.role,  # type: ignore[arg-type]
        agent_id=row.agent_id,
        text=message_text(body, content),
        call_ids=tuple(c["id"] for c in body.get("tool_calls") or ()),
        answers=row.tool_call_id,
    )


# --- applying a projection's changes ----------------------------------------------


def _apply(tables: _Tables, cid: uuid.UUID, changes: Changes) -> None:
    views = tables.views[cid]
    stream = tables.streams[cid]
    for step in changes.steps:
        match step:
            case StartViews():
                tables.views[cid] = views = _Views()
                views.members[1] = []
                views.batch_versions[1] = step.version
                views.batches[1] = Batch(
                    number=1,
                    boundary=Decimal(0),
                    summary_seq=None,
                    retained=(),
                    operation="conversation_started",
                    parameters={},
                    started_at=step.started_at,
                )
                stream.metadata = _as_json(step.metadata)
            case AppendMessages():
                _append(views, step)
            case EditMessage():
                views.edits[step.seq] = step.edit_version
                views.messages[step.seq] = replace(
                    views.messages[step.seq], token_estimate=step.token_estimate
                )
            case StartBatch():
                retained = set(step.retained)
                views.members[step.batch] = [
                    (key, seq)
                    for key, seq in views.members.get(step.source_batch, ())
                    if (key >= step.boundary or seq in retained)
                    and (step.agent_id is None or views.messages[seq].agent_id == step.agent_id)
                ]
                views.batch_versions[step.batch] = step.version
                views.batches[step.batch] = Batch(
                    number=step.batch,
                    boundary=step.boundary,
                    summary_seq=step.summary_seq,
                    retained=step.retained,
                    operation=step.operation,
                    parameters=_as_json(step.parameters),
                    started_at=step.started_at,
                    agent_id=step.agent_id,
                )
            case PinMessage():
                if step.pinned:
                    views.pinned.add(step.seq)
                else:
                    views.pinned.discard(step.seq)
            case CopyForked():
                _copy_forked(tables, cid, step)
            case ConfigureAgent():
                _configure(views, step)
            case SetSlot():
                slots = views.slots.setdefault(step.agent_id, {})
                if step.value is None:
                    slots.pop(step.slot, None)
                else:
                    slots[step.slot] = _as_json(step.value)
            case Archive():
                stream.archived_at = step.archived_at
            case SetMetadata():
                stream.metadata = _as_json(step.metadata)
            case PurgeViews():
                tables.views.pop(cid, None)
                views = tables.views[cid]
    stream.next_seq = changes.head.next_seq
    stream.current_batch = changes.head.current_batch
    stream.agent_batches = dict(changes.head.agent_batches)


def _fork_window_rows(
    views: _Views, copied: list[MessageRow], up_to: int
) -> list[tuple[str, int, Decimal, int, bool]]:
    """`sql.FORK_WINDOWS`: each copied message, the batch of its agent's
    window at the fork point, and whether that window shows it."""
    after = [m for seq, m in views.messages.items() if seq > up_to]
    next_version = min((m.event_version for m in after), default=2**31 - 1)
    batch_of = {
        agent: max(
            n
            for n, batch in views.batches.items()
            if batch.agent_id in (None, agent) and views.batch_versions[n] < next_version
        )
        for agent in {m.agent_id for m in copied}
    }
    shown = {
        batch: {seq for _, seq in views.members.get(batch, ())} for batch in set(batch_of.values())
    }
    return [
        (m.agent_id, m.seq, m.sort_key, batch_of[m.agent_id], m.seq in shown[batch_of[m.agent_id]])
        for m in copied
    ]


def _copy_forked(tables: _Tables, cid: uuid.UUID, step: CopyForked) -> None:
    """The fork's messages as PostgreSQL copies them (`sql.COPY_FORKED`):
    events of the fork in seq order, the pinned ones' pins after them, and
    the rows the projector derives from those events."""
    parent = tables.views[step.parent]
    seqs = sorted(
        seq
        for seq, row in parent.messages.items()
        if seq <= step.up_to_seq and (step.agent_id is None or row.agent_id == step.agent_id)
    )
    stream, log = tables.streams[cid], tables.events[cid]
    transaction = log[-1].transaction_id
    rows: list[_EventRow] = []
    for version, seq in enumerate(seqs, start=step.first_version):
        row = parent.messages[seq]
        appended = _event(tables, step.parent, row.event_version)
        body = dict(appended.data["message"])
        edit = parent.edits.get(seq)
        if edit is not None:
            body["content"] = _event(tables, step.parent, edit).data["content"]
            body["token_estimate"] = row.token_estimate
        data: dict[str, Any] = {"seq": seq, "batch": 1}
        if row.sort_key != seq:
            data["sort_key"] = str(row.sort_key)
        data["message"] = body
        rows.append(_fork_row(tables, version, "message_appended", data, appended.recorded_at))
    pins = [seq for seq in seqs if seq in parent.pinned]
    for version, seq in enumerate(pins, start=step.first_version + len(seqs)):
        data = {"seq": seq, "pinned": True}
        rows.append(_fork_row(tables, version, "message_pinned", data, stream.updated_at))
    rows = [replace(r, transaction_id=transaction) for r in rows]
    log.extend(rows)
    log.sort(key=lambda e: e.version)
    copied = [
        Recorded(version=r.version, recorded_at=r.recorded_at, event=from_data(r.type, r.data))
        for r in rows
    ]
    _apply(tables, cid, project(ViewHead(), copied))


def _fork_row(
    tables: _Tables, version: int, type_: str, data: dict[str, Any], at: datetime
) -> _EventRow:
    return _EventRow(
        position=next(tables.positions),
        version=version,
        type=type_,
        data=data,
        recorded_at=at,
        transaction_id=0,
    )


def _append(views: _Views, step: AppendMessages) -> None:
    for row in step.messages:
        views.messages[row.seq] = row
        views.role_index[row.role].append(row.seq)
        bisect.insort(views.sort_keys, row.sort_key)
        bisect.insort(views.members.setdefault(row.batch, []), (row.sort_key, row.seq))
        if row.client_message_id is not None:
            views.client_ids[row.client_message_id] = row.seq
    for call in step.calls:
        views.calls[call.call_id] = _Call(
            agent_id=call.agent_id,
            tool_name=call.tool_name,
            assistant_seq=call.assistant_seq,
            result_seq=call.result_seq,
            is_error=call.is_error,
        )
    for answer in step.answered:
        answered = views.calls.get(answer.call_id)
        if answered is not None:
            answered.result_seq = answer.result_seq
            answered.is_error = answer.is_error


def _configure(views: _Views, step: ConfigureAgent) -> None:
    if step.role_definition_only:
        profile = views.profiles.get(step.agent_id) or AgentProfile(
            agent_id=step.agent_id, is_sub_agent=step.is_sub_agent
        )
        views.profiles[step.agent_id] = profile.model_copy(
            update={"role_definition": step.role_definition}
        )
        return
    views.profiles[step.agent_id] = AgentProfile(
        agent_id=step.agent_id,
        is_sub_agent=step.is_sub_agent,
        system_prompt=step.system_prompt,
        role_definition=step.role_definition,
    )


# --- the write session ------------------------------------------------------------


class _WriteSession:
    """A write on one conversation, under its lock; applies at `write()`."""

    remembered = False  # the stream row is always read under the lock here

    def __init__(self, tables: _Tables, cid: uuid.UUID, stream: StreamRow | None) -> None:
        self.tables = tables
        self.conversation_id = cid
        self._stream = stream

    @property
    def stream(self) -> StreamRow | None:
        return self._stream

    @property
    def _views(self) -> _Views:
        return self.tables.views[self.conversation_id]

    # ConversationState
    async def head(self) -> Head:
        assert self._stream is not None
        return self._stream.head.for_decisions()

    async def calls(self, call_ids: set[str]) -> dict[str, CallState]:
        calls = self._views.calls
        return {
            i: CallState(agent_id=calls[i].agent_id, answered=calls[i].result_seq is not None)
            for i in call_ids
            if i in calls
        }

    async def pending_call_ids(self, agent_id: str | None = None) -> set[str]:
        return {
            i
            for i, c in self._views.calls.items()
            if c.result_seq is None and (agent_id is None or c.agent_id == agent_id)
        }

    async def window(self, agent_id: str) -> list[WindowEntry]:
        window = await self.batch_window((await self.head()).batch_of(agent_id), agent_id)
        assert window is not None
        return window

    async def batch_window(
        self, batch: int, agent_id: str | None = None
    ) -> list[WindowEntry] | None:
        found = self._views.batches.get(batch)
        if found is None or found.agent_id not in (None, agent_id):
            return None
        messages = self._views.messages
        return [
            _window_entry(self.tables, self.conversation_id, key, seq)
            for key, seq in self._views.members.get(batch, ())
            if agent_id is None or messages[seq].agent_id == agent_id
        ]

    async def fork_source(
        self, parent: uuid.UUID, tenant: str, up_to_seq: int | None, agent_id: str | None
    ) -> ForkSource:
        row = self.tables.streams.get(parent)
        if row is None or row.tenant != tenant or row.version == 0:
            raise ConversationNotFound(parent)
        if row.deleted_at is not None:
            raise ConversationDeleted(parent)
        up_to = row.next_seq - 1 if up_to_seq is None else up_to_seq
        if up_to >= row.next_seq:
            raise InvalidOperation(
                f"fork up_to_seq {up_to} is past the parent's last message (seq {row.next_seq - 1})"
            )
        views = self.tables.views[parent]
        copied = [
            m
            for m in views.messages.values()
            if m.seq <= up_to and (agent_id is None or m.agent_id == agent_id)
        ]
        roles = [m.role for m in copied]
        return ForkSource(
            version=row.version,
            up_to_seq=up_to,
            messages=len(copied),
            last_seq=max((m.seq for m in copied), default=0),
            pinned=sum(m.seq in views.pinned for m in copied),
            role_counts={role: roles.count(role) for role in ROLES},
            profiles=tuple(
                views.profiles[a]
                for a in sorted(views.profiles)
                if agent_id is None or a == agent_id
            ),
            slots=tuple(
                (a, slot, value)
                for a in sorted(views.slots)
                if agent_id is None or a == agent_id
                for slot, value in sorted(views.slots[a].items())
            ),
            windows=fork_windows(_fork_window_rows(views, copied, up_to)),
        )

    async def key_after(self, key: Decimal) -> Decimal | None:
        keys = self._views.sort_keys
        i = bisect.bisect_right(keys, key)
        return keys[i] if i < len(keys) else None

    async def key_before(self, key: Decimal) -> Decimal | None:
        keys = self._views.sort_keys
        i = bisect.bisect_left(keys, key)
        return keys[i - 1] if i > 0 else None

    async def message(self, seq: int) -> StoredMessage | None:
        if seq not in self._views.messages:
            return None
        return _stored(self.tables, self.conversation_id, seq)

    # the rest of the write port
    async def request(self, idempotency_key: str) -> StoredRequest | None:
        return self.tables.requests[self.conversation_id].get(idempotency_key)

    async def messages_by_client_id(self, client_ids: Sequence[str]) -> dict[str, StoredMessage]:
        known = self._views.client_ids
        return {
            c: _stored(self.tables, self.conversation_id, known[c])
            for c in client_ids
            if c in known
        }

    async def messages_written_by(
        self, first_version: int, last_version: int
    ) -> list[StoredMessage]:
        return [
            _stored(self.tables, self.conversation_id, row.seq)
            for row in sorted(self._views.messages.values(), key=lambda r: r.seq)
            if first_version <= row.event_version <= last_version
        ]

    async def write(self, write: Write) -> None:
        """Applied at once (returns None: the events are recorded at `stream.now`)."""
        cid, tables = self.conversation_id, self.tables
        transaction = next(tables.transactions)
        assert self._stream is not None
        for event in write.events:
            tables.events[cid].append(
                _EventRow(
                    position=next(tables.positions),
                    version=event.version,
                    type=event.type,
                    data=event.data,
                    recorded_at=self._stream.now,
                    transaction_id=transaction,
                )
            )
        stream = tables.streams[cid]
        stream.version = write.version or write.events[-1].version
        stream.updated_at = self._stream.now
        _apply(tables, cid, write.changes)
        if write.request is not None:
            key, request = write.request
            tables.requests[cid][key] = request
        async with tables.feed_moved:
            tables.feed_moved.notify_all()

    async def purge(self) -> None:
        cid = self.conversation_id
        self.tables.events.pop(cid, None)
        self.tables.requests.pop(cid, None)
        self.tables.views.pop(cid, None)
        stream = self.tables.streams[cid]
        assert self._stream is not None
        stream.deleted_at = self._stream.now
        stream.metadata = {}


class _RebuildSession:
    def __init__(self, tables: _Tables, cid: uuid.UUID) -> None:
        self.tables = tables
        self.conversation_id = cid

    async def events(self, after_version: int, limit: int) -> list[Recorded]:
        rows = [e for e in self.tables.events[self.conversation_id] if e.version > after_version]
        return [
            Recorded(version=e.version, recorded_at=e.recorded_at, event=from_data(e.type, e.data))
            for e in rows[:limit]
        ]

    async def apply(self, changes: Changes) -> None:
        _apply(self.tables, self.conversation_id, changes)


def _feed_event(key: str, event: RecordedEvent | _EventRow) -> FeedEvent:
    return FeedEvent(
        checkpoint=f"{event.transaction_id}-{event.position}",
        conversation_id=key,
        version=event.version,
        type=event.type,
        recorded_at=event.recorded_at,
        data=event.data,
    )


# --- the storage ------------------------------------------------------------------


class MemoryStorage:
    """`store.repository.port.Storage` over dicts."""

    def __init__(self) -> None:
        self._tables = _Tables()
        self._locks: dict[uuid.UUID, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._claims: set[str] = set()  # try_claim's names held in this process

    def _head(self, cid: uuid.UUID, row: _StreamRow) -> ViewHead:
        index = self._tables.views[cid].role_index if cid in self._tables.views else {}
        return ViewHead(
            next_seq=row.next_seq,
            current_batch=row.current_batch,
            role_counts={role: len(index.get(role, ())) for role in ROLES},
            agent_batches=dict(row.agent_batches),
        )

    @asynccontextmanager
    async def writing(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        *,
        create: str | None = None,
        lookups: Lookups = NO_LOOKUPS,
        optimistic: bool = False,  # nothing to gain in memory: always reads the row
    ) -> AsyncIterator[_WriteSession]:
        async with self._locks[conversation_id]:
            now = datetime.now(UTC)
            row = self._tables.streams.get(conversation_id)
            if row is None and create is not None:
                row = _StreamRow(tenant=tenant, key=create, created_at=now, updated_at=now)
            stream = (
                None
                if row is None
                else StreamRow(
                    tenant=row.tenant,
                    version=row.version,
                    deleted=row.deleted_at is not None,
                    archived=row.archived_at is not None,
                    head=self._head(conversation_id, row),
                    now=now,
                )
            )
            session = _WriteSession(self._tables, conversation_id, stream)
            if row is not None and conversation_id not in self._tables.streams:
                # Created here: kept only if the write goes through, as the
                # INSERT of the stream row commits only with the transaction.
                self._tables.streams[conversation_id] = row
                try:
                    yield session
                except BaseException:
                    if row.version == 0:
                        del self._tables.streams[conversation_id]
                    raise
                return
            yield session

    # --- reads -------------------------------------------------------------------

    def _readable(self, cid: uuid.UUID, tenant: str) -> _StreamRow:
        row = self._tables.streams.get(cid)
        if row is None or row.tenant != tenant or row.version == 0:
            raise ConversationNotFound(cid)
        if row.deleted_at is not None:
            raise ConversationDeleted(cid)
        return row

    def _messages(self, cid: uuid.UUID, seqs: Iterable[int]) -> list[StoredMessage]:
        return [_stored(self._tables, cid, s) for s in seqs]

    async def conversation(self, conversation_id: uuid.UUID, tenant: str) -> Conversation:
        row = self._readable(conversation_id, tenant)
        return Conversation(
            id=row.key,
            tenant=row.tenant,
            version=row.version,
            current_batch=row.batch_of(MAIN_AGENT),
            next_seq=row.next_seq,
            archived=row.archived_at is not None,
            started_at=row.created_at,
            metadata=row.metadata,
            updated_at=row.updated_at,
        )

    def _window_members(
        self,
        cid: uuid.UUID,
        row: _StreamRow,
        batch: int | None = None,
        agent_id: str | None = None,
        role: str | None = None,
    ) -> list[tuple[Decimal, int]]:
        """Batch `batch`'s window (of `agent_id`'s messages, if given), else
        `agent_id`'s current window, else every agent's current window:
        (sort key, seq) in window order."""
        views = self._tables.views[cid]
        messages = views.messages
        if batch is None and agent_id is None:
            numbers = {row.current_batch, *row.agent_batches.values()}
            found = sorted(
                (key, seq)
                for number in numbers
                for key, seq in views.members.get(number, ())
                if row.batch_of(messages[seq].agent_id) == number
            )
        else:
            number = row.batch_of(agent_id or "") if batch is None else batch
            found = [
                (key, seq)
                for key, seq in views.members.get(number, ())
                if agent_id is None or messages[seq].agent_id == agent_id
            ]
        return [(k, s) for k, s in found if role is None or messages[s].role == role]

    def _window_seqs(
        self,
        cid: uuid.UUID,
        row: _StreamRow,
        batch: int | None = None,
        agent_id: str | None = None,
        role: str | None = None,
    ) -> list[int]:
        return [seq for _, seq in self._window_members(cid, row, batch, agent_id, role)]

    async def window(
        self, conversation_id: uuid.UUID, tenant: str, *, batch: int | None, agent_id: str | None
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        return self._messages(
            conversation_id, self._window_seqs(conversation_id, row, batch, agent_id)
        )

    async def recent_in_window(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        seqs = self._window_seqs(conversation_id, row, None, agent_id, role)
        return self._messages(conversation_id, seqs[max(len(seqs) - n, 0) :] if n else [])

    async def recent_in_history(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        seqs = [
            s
            for s in views.role_index[role]
            if agent_id is None or views.messages[s].agent_id == agent_id
        ]
        return self._messages(conversation_id, seqs[max(len(seqs) - n, 0) :] if n else [])

    async def role_range(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        seqs = self._tables.views[conversation_id].role_index[role][first - 1 : last]
        return self._messages(conversation_id, seqs)

    async def count_in_window(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        row = self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        roles = [views.messages[s].role for s in self._window_seqs(conversation_id, row)]
        return {role: roles.count(role) for role in ROLES}

    async def count_in_history(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        self._readable(conversation_id, tenant)
        index = self._tables.views[conversation_id].role_index
        return {role: len(index[role]) for role in ROLES}

    async def history(
        self, conversation_id: uuid.UUID, tenant: str, page: HistoryPage
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        visible = set(self._window_seqs(conversation_id, row)) if page.visible_only else None
        seqs = sorted(
            s
            for s, m in views.messages.items()
            if (page.after_seq is None or s > page.after_seq)
            and (page.before_seq is None or s < page.before_seq)
            and (page.role is None or m.role == page.role)
            and (page.agent_id is None or m.agent_id == page.agent_id)
            and (page.kind is None or m.kind == page.kind)
            and (visible is None or s in visible)
        )
        if page.descending:
            seqs.reverse()
        return self._messages(conversation_id, seqs[: page.limit])

    async def window_page(
        self, conversation_id: uuid.UUID, tenant: str, page: WindowPage
    ) -> list[tuple[Decimal, StoredMessage]]:
        row = self._readable(conversation_id, tenant)
        found = [
            (key, seq)
            for key, seq in self._window_members(conversation_id, row, page.batch, page.agent_id)
            if page.after_key is None or key > page.after_key
        ][: page.limit]
        return [(key, _stored(self._tables, conversation_id, seq)) for key, seq in found]

    async def list_conversations(self, tenant: str, query: ConversationQuery) -> list[Listed]:
        def wanted(row: _StreamRow) -> bool:
            return (
                row.tenant == tenant
                and row.version > 0
                and row.deleted_at is None
                and (query.metadata is None or json_contains(row.metadata, query.metadata))
                and (query.archived is None or (row.archived_at is not None) == query.archived)
                and (query.created_from is None or row.created_at >= query.created_from)
                and (query.created_to is None or row.created_at < query.created_to)
                and (query.updated_from is None or row.updated_at >= query.updated_from)
                and (query.updated_to is None or row.updated_at < query.updated_to)
            )

        newest = query.order == "newest"
        found = sorted(
            ((row.created_at, cid) for cid, row in self._tables.streams.items() if wanted(row)),
            reverse=newest,
        )
        if query.after is not None:
            after = (query.after.created_at, query.after.id)
            found = [k for k in found if (k < after if newest else k > after)]
        return [
            Listed(
                conversation=await self.conversation(cid, tenant),
                cursor=ConversationCursor(created_at=created_at, id=cid),
            )
            for created_at, cid in found[: query.limit]
        ]

    async def tool_blocks(
        self, conversation_id: uuid.UUID, tenant: str, *, pending_only: bool, agent_id: str | None
    ) -> list[ToolBlock]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        blocks = []
        for call_id, call in sorted(
            views.calls.items(), key=lambda item: (item[1].assistant_seq, item[0])
        ):
            if pending_only and call.result_seq is not None:
                continue
            if agent_id is not None and call.agent_id != agent_id:
                continue
            body = _event(
                self._tables, conversation_id, views.messages[call.assistant_seq].event_version
            ).data["message"]
            arguments = next(
                c.get("arguments", {}) for c in body["tool_calls"] if c["id"] == call_id
            )
            blocks.append(
                ToolBlock(
                    call_id=call_id,
                    tool_name=call.tool_name,
                    arguments=arguments,
                    agent_id=call.agent_id,
                    assistant_seq=call.assistant_seq,
                    result_seq=call.result_seq,
                    status="pending" if call.result_seq is None else "complete",
                    is_error=call.is_error,
                )
            )
        return blocks

    async def batch_messages(
        self, conversation_id: uuid.UUID, tenant: str, batch: int
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        messages = self._tables.views[conversation_id].messages
        return self._messages(
            conversation_id, sorted(s for s, row in messages.items() if row.batch == batch)
        )

    async def batches(self, conversation_id: uuid.UUID, tenant: str) -> list[Batch]:
        self._readable(conversation_id, tenant)
        batches = self._tables.views[conversation_id].batches
        return [batches[n] for n in sorted(batches)]

    async def agent(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> tuple[AgentProfile, ContextSlots]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        return (
            views.profiles.get(agent_id) or default_profile(agent_id),
            slots_from_values(views.slots.get(agent_id, {})),
        )

    async def assembly_input(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> AssemblyInput:
        row = self._readable(conversation_id, tenant)
        profile, slots = await self.agent(conversation_id, tenant, agent_id)
        seqs = self._window_seqs(conversation_id, row, None, agent_id)
        views = self._tables.views[conversation_id]
        rows = []  # as the PostgreSQL storage reads them: each event's JSON
        for seq in seqs:
            body = _event(self._tables, conversation_id, views.messages[seq].event_version).data
            edit = views.edits.get(seq)
            rows.append((body, _event(self._tables, conversation_id, edit).data if edit else None))
        return AssemblyInput(window=StoredWindow(rows), profile=profile, slots=slots)

    async def search_messages(self, tenant: str, query: SearchQuery) -> SearchPage:
        """A scan of the tenant's messages (store.domain.search: the same filters,
        whole-word matching for text mode)."""

        def candidates() -> Iterator[Candidate]:
            for cid, stream in self._tables.streams.items():
                if stream.tenant != tenant or stream.deleted_at is not None:
                    continue
                views = self._tables.views[cid]
                names: dict[int, set[str]] = defaultdict(set)
                for call in views.calls.values():
                    names[call.assistant_seq].add(call.tool_name)
                    if call.result_seq is not None:
                        names[call.result_seq].add(call.tool_name)
                for seq, row in views.messages.items():
                    event = _event(self._tables, cid, row.event_version)
                    edit = views.edits.get(seq)
                    content = _event(self._tables, cid, edit).data["content"] if edit else None
                    yield Candidate(
                        conversation=cid,
                        shown_id=stream.key,
                        metadata=stream.metadata,
                        seq=seq,
                        role=row.role,  # type: ignore[arg-type]
                        agent_id=row.agent_id,
                        kind=row.kind,
                        batch=row.batch,
                        recorded_at=event.recorded_at,
                        edited=edit is not None,
                        text=message_text(event.data["message"], content),
                        tool_names=frozenset(names.get(seq, ())),
                    )

        return search_candidates(query, candidates())

    # --- the log -------------------------------------------------------------------

    async def read_feed(self, after: FeedPosition, limit: int) -> list[RecordedEvent]:
        # Every write here is finished when it returns: nothing is in flight.
        events = sorted(
            (
                RecordedEvent(
                    position=e.position,
                    conversation_id=cid,
                    version=e.version,
                    type=e.type,
                    data=e.data,
                    recorded_at=e.recorded_at,
                    transaction_id=e.transaction_id,
                )
                for cid, rows in self._tables.events.items()
                for e in rows
            ),
            key=lambda e: (e.transaction_id, e.position),
        )
        start = (after.transaction_id, after.position)
        return [e for e in events if (e.transaction_id, e.position) > start][:limit]

    async def feed_head(self) -> FeedPosition:
        last = await self.read_feed(FeedPosition.start(), limit=10**12)
        return last[-1].feed_position if last else FeedPosition.start()

    async def conversation_ids(self) -> list[uuid.UUID]:
        return sorted(self._tables.streams)

    async def compaction_candidates(
        self, tenant: str, query: CandidateQuery
    ) -> list[CompactionCandidate]:
        found: list[CompactionCandidate] = []
        rows = sorted(
            (row.created_at, cid, row)
            for cid, row in self._tables.streams.items()
            if row.tenant == tenant
            and row.version > 0
            and row.deleted_at is None
            and row.archived_at is None
        )
        for created_at, cid, row in rows:
            if query.after is not None and (created_at, cid) <= (
                query.after.created_at,
                query.after.stream,
            ):
                continue
            views = self._tables.views[cid]
            batch = row.batch_of(query.agent_id)
            shown = [
                views.messages[seq]
                for _, seq in views.members.get(batch, ())
                if views.messages[seq].agent_id == query.agent_id
            ]
            messages, tokens = len(shown), sum(m.token_estimate for m in shown)
            if (query.max_messages is not None and messages > query.max_messages) or (
                query.max_tokens is not None and tokens > query.max_tokens
            ):
                found.append(
                    CompactionCandidate(
                        conversation_id=row.key,
                        version=row.version,
                        messages=messages,
                        tokens=tokens,
                        cursor=CandidateCursor(created_at=created_at, stream=cid),
                    )
                )
                if len(found) == query.limit:
                    break
        return found

    @asynccontextmanager
    async def try_claim(self, name: str) -> AsyncIterator[bool]:
        if name in self._claims:
            yield False
            return
        self._claims.add(name)
        try:
            yield True
        finally:
            self._claims.discard(name)

    async def count_events(self, conversation_id: uuid.UUID | None = None) -> int:
        events = self._tables.events
        if conversation_id is not None:
            return len(events.get(conversation_id, ()))
        return sum(len(rows) for rows in events.values())

    # --- export and the tenant feed (store.domain.feed, store.repository.export) ---

    async def tenant_feed(self, tenant: str, after: FeedPosition, limit: int) -> FeedPage:
        # As on PostgreSQL: at most `scan_limit` events of the global feed
        # scanned, the page ends at the last one within it.
        scan = scan_limit(limit)
        scanned = await self.read_feed(after, scan)
        streams = self._tables.streams
        events: list[FeedEvent] = []
        last = after
        for e in scanned:
            if len(events) == limit and streams[e.conversation_id].tenant == tenant:
                break
            last = e.feed_position
            if streams[e.conversation_id].tenant == tenant:
                events.append(_feed_event(streams[e.conversation_id].key, e))
        return FeedPage(
            events=events, next=checkpoint(last), more=len(scanned) >= scan or len(events) >= limit
        )

    async def conversation_events(
        self, conversation_id: uuid.UUID, tenant: str, after_version: int, limit: int
    ) -> list[FeedEvent]:
        key = self._readable(conversation_id, tenant).key
        rows = [e for e in self._tables.events[conversation_id] if e.version > after_version]
        return [_feed_event(key, e) for e in rows[:limit]]

    async def changed_conversations(
        self, tenant: str, since: datetime, after: uuid.UUID | None, limit: int
    ) -> list[ChangedConversation]:
        found = [
            ChangedConversation(id=cid, key=row.key, updated_at=row.updated_at)
            for cid, row in sorted(self._tables.streams.items())
            if row.tenant == tenant
            and row.deleted_at is None
            and row.version > 0
            and row.updated_at >= since
            and (after is None or cid > after)
        ]
        return found[:limit]

    async def wait_for_feed(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        moved = self._tables.feed_moved
        async with moved:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait(), timeout)

    @asynccontextmanager
    async def rebuilding(self, conversation_id: uuid.UUID) -> AsyncIterator[_RebuildSession]:
        async with self._locks[conversation_id]:
            self._tables.views.pop(conversation_id, None)
            stream = self._tables.streams[conversation_id]
            stream.next_seq, stream.current_batch, stream.archived_at = 1, 1, None
            stream.agent_batches = {}
            yield _RebuildSession(self._tables, conversation_id)

    async def tenant_usage(self, tenant: str) -> tuple[int, int]:
        """(conversations not deleted, bytes of their log as JSON) of `tenant`."""
        streams = [cid for cid, row in self._tables.streams.items() if row.tenant == tenant]
        live = sum(self._tables.streams[cid].deleted_at is None for cid in streams)
        stored = sum(
            len(json.dumps(e.data, separators=(",", ":")))
            for cid in streams
            for e in self._tables.events.get(cid, ())
        )
        return live, stored

    async def ping(self) -> None:
        return None

    async def feed_lag(self) -> float:
        return 0.0  # every write here is finished when it returns

    async def close(self) -> None:
        return None


def InMemoryRepository(  # noqa: N802 - reads as the class it stood for
    *, tenant: str = DEFAULT_TENANT, limits: Limits | None = None
) -> Repository:
    """A `Repository` over a fresh `MemoryStorage`; `for_tenant` shares it."""
    return Repository(MemoryStorage(), tenant=tenant, limits=limits)
