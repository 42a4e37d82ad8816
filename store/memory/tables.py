"""The in-memory backend's tables: one row type per PostgreSQL table, the
dicts that hold them (`Tables`), and how a write's changes are applied to
them (`apply_changes`, the projector's steps as PostgreSQL's statements
apply them; a fork's copies, `copy_forked`).

PostgreSQL keeps JSON in JSONB columns; storing the same JSON here means a
read returns what PostgreSQL would return (tuples come back as lists, ...).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import uuid
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import TypeAdapter

from store.domain.codec import decode_stored, message_text
from store.domain.context import AgentProfile
from store.domain.events import from_data
from store.domain.messages import ROLES, StoredMessage
from store.domain.projector import (
    AppendMessages,
    Archive,
    CallRow,
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
from store.domain.values import Batch
from store.domain.window import WindowEntry
from store.repository.port import (
    StoredRequest,
)

# PostgreSQL keeps JSON in JSONB columns; storing the same JSON here means a
# read returns what PostgreSQL would return (tuples come back as lists, ...).
_JSON: TypeAdapter[Any] = TypeAdapter(Any)


def as_json(value: Any) -> Any:
    return _JSON.dump_python(value, mode="json")


# --- rows: one per PostgreSQL table row ------------------------------------------


@dataclass(kw_only=True)
class StreamRecord:
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
class EventRecord:
    position: int
    version: int
    type: str
    data: dict[str, Any]
    recorded_at: datetime
    transaction_id: int


@dataclass(kw_only=True)
class Views:
    """Every view row of one conversation."""

    messages: dict[int, MessageRow] = field(default_factory=dict)
    edits: dict[int, int] = field(default_factory=dict)  # seq → edit event version
    sort_keys: list[Decimal] = field(default_factory=list)  # every message's, sorted
    role_index: dict[str, list[int]] = field(default_factory=lambda: {r: [] for r in ROLES})
    members: dict[int, list[tuple[Decimal, int]]] = field(default_factory=dict)
    batches: dict[int, Batch] = field(default_factory=dict)
    batch_versions: dict[int, int] = field(default_factory=dict)  # batch → its event's version
    calls: dict[str, CallRow] = field(default_factory=dict)  # copies: answered in place
    profiles: dict[str, AgentProfile] = field(default_factory=dict)
    slots: dict[str, dict[str, Any]] = field(default_factory=dict)
    client_ids: dict[str, int] = field(default_factory=dict)  # client id → seq
    pinned: set[int] = field(default_factory=set)


class Tables:
    def __init__(self) -> None:
        self.streams: dict[uuid.UUID, StreamRecord] = {}
        self.events: dict[uuid.UUID, list[EventRecord]] = defaultdict(list)
        self.views: dict[uuid.UUID, Views] = defaultdict(Views)
        self.requests: dict[uuid.UUID, dict[str, StoredRequest]] = defaultdict(dict)
        self.positions = itertools.count(1)
        self.transactions = itertools.count(1)
        # Tailing readers wait on it (`wait_for_feed`); every write wakes them.
        self.feed_moved = asyncio.Condition()


# --- reading rows back ------------------------------------------------------------


def stored_message(tables: Tables, cid: uuid.UUID, seq: int) -> StoredMessage:
    views = tables.views[cid]
    row = views.messages[seq]
    event = event_record(tables, cid, row.event_version)
    edit_version = views.edits.get(seq)
    edited = event_record(tables, cid, edit_version).data["content"] if edit_version else None
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


def event_record(tables: Tables, cid: uuid.UUID, version: int) -> EventRecord:
    events = tables.events[cid]
    i = bisect.bisect_left(events, version, key=lambda e: e.version)
    return events[i]


def window_entry(tables: Tables, cid: uuid.UUID, sort_key: Decimal, seq: int) -> WindowEntry:
    views = tables.views[cid]
    row = views.messages[seq]
    body = event_record(tables, cid, row.event_version).data["message"]
    edit_version = views.edits.get(seq)
    content = event_record(tables, cid, edit_version).data["content"] if edit_version else None
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


def apply_changes(tables: Tables, cid: uuid.UUID, changes: Changes) -> None:
    views = tables.views[cid]
    stream = tables.streams[cid]
    for step in changes.steps:
        match step:
            case StartViews():
                tables.views[cid] = views = Views()
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
                stream.metadata = as_json(step.metadata)
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
                    parameters=as_json(step.parameters),
                    started_at=step.started_at,
                    agent_id=step.agent_id,
                )
            case PinMessage():
                if step.pinned:
                    views.pinned.add(step.seq)
                else:
                    views.pinned.discard(step.seq)
            case CopyForked():
                copy_forked(tables, cid, step)
            case ConfigureAgent():
                _configure(views, step)
            case SetSlot():
                slots = views.slots.setdefault(step.agent_id, {})
                if step.value is None:
                    slots.pop(step.slot, None)
                else:
                    slots[step.slot] = as_json(step.value)
            case Archive():
                stream.archived_at = step.archived_at
            case SetMetadata():
                stream.metadata = as_json(step.metadata)
            case PurgeViews():
                tables.views.pop(cid, None)
                views = tables.views[cid]
    stream.next_seq = changes.head.next_seq
    stream.current_batch = changes.head.current_batch
    stream.agent_batches = dict(changes.head.agent_batches)


def fork_window_rows(
    views: Views, copied: list[MessageRow], up_to: int
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


def copy_forked(tables: Tables, cid: uuid.UUID, step: CopyForked) -> None:
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
    rows: list[EventRecord] = []
    for version, seq in enumerate(seqs, start=step.first_version):
        row = parent.messages[seq]
        appended = event_record(tables, step.parent, row.event_version)
        body = dict(appended.data["message"])
        edit = parent.edits.get(seq)
        if edit is not None:
            body["content"] = event_record(tables, step.parent, edit).data["content"]
            body["token_estimate"] = row.token_estimate
        data: dict[str, Any] = {"seq": seq, "batch": 1}
        if row.sort_key != seq:
            data["sort_key"] = str(row.sort_key)
        data["message"] = body
        rows.append(fork_row(tables, version, "message_appended", data, appended.recorded_at))
    pins = [seq for seq in seqs if seq in parent.pinned]
    for version, seq in enumerate(pins, start=step.first_version + len(seqs)):
        data = {"seq": seq, "pinned": True}
        rows.append(fork_row(tables, version, "message_pinned", data, stream.updated_at))
    rows = [replace(r, transaction_id=transaction) for r in rows]
    log.extend(rows)
    log.sort(key=lambda e: e.version)
    copied = [
        Recorded(version=r.version, recorded_at=r.recorded_at, event=from_data(r.type, r.data))
        for r in rows
    ]
    apply_changes(tables, cid, project(ViewHead(), copied))


def fork_row(
    tables: Tables, version: int, type_: str, data: dict[str, Any], at: datetime
) -> EventRecord:
    return EventRecord(
        position=next(tables.positions),
        version=version,
        type=type_,
        data=data,
        recorded_at=at,
        transaction_id=0,
    )


def _append(views: Views, step: AppendMessages) -> None:
    for row in step.messages:
        views.messages[row.seq] = row
        views.role_index[row.role].append(row.seq)
        bisect.insort(views.sort_keys, row.sort_key)
        bisect.insort(views.members.setdefault(row.batch, []), (row.sort_key, row.seq))
        if row.client_message_id is not None:
            views.client_ids[row.client_message_id] = row.seq
    for call in step.calls:
        views.calls[call.call_id] = replace(call)
    for answer in step.answered:
        answered = views.calls.get(answer.call_id)
        if answered is not None:
            answered.result_seq = answer.result_seq
            answered.is_error = answer.is_error


def _configure(views: Views, step: ConfigureAgent) -> None:
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
