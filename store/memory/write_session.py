"""A write (and a rebuild) on the in-memory backend, under the
conversation's lock: what a decision may ask of the tables, and the write
that applies at `write()` (store.repository.port.WriteSession).
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from store.domain.commands import Head
from store.domain.errors import ConversationDeleted, ConversationNotFound, InvalidOperation
from store.domain.events import from_data
from store.domain.messages import ROLES, StoredMessage
from store.domain.projector import (
    Changes,
    Recorded,
)
from store.domain.validation import CallState
from store.domain.window import WindowEntry
from store.memory.tables import (
    EventRecord,
    Tables,
    Views,
    apply_changes,
    fork_window_rows,
    stored_message,
    window_entry,
)
from store.repository.port import (
    CurrentWindow,
    ForkSource,
    RestoredEvent,
    StaleHead,
    StoredRequest,
    StreamRow,
    Write,
    check_restored_order,
    fork_windows,
)


class MemoryWriteSession(CurrentWindow):
    """A write on one conversation, under its lock; applies at `write()`."""

    def __init__(
        self, tables: Tables, cid: uuid.UUID, stream: StreamRow | None, *, stale: bool = False
    ) -> None:
        # The stream row is always read under the lock here; `stale` plays
        # an optimistic write whose remembered row another writer moved on
        # (`MemoryStorage.report_stale_heads`): it writes nothing.
        self.remembered = stale
        self.tables = tables
        self.conversation_id = cid
        self._stream = stream

    @property
    def stream(self) -> StreamRow | None:
        return self._stream

    @property
    def _views(self) -> Views:
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

    async def batch_window(
        self, batch: int, agent_id: str | None = None
    ) -> list[WindowEntry] | None:
        found = self._views.batches.get(batch)
        if found is None or found.agent_id not in (None, agent_id):
            return None
        messages = self._views.messages
        return [
            window_entry(self.tables, self.conversation_id, key, seq)
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
            windows=fork_windows(fork_window_rows(views, copied, up_to)),
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
        return stored_message(self.tables, self.conversation_id, seq)

    # the rest of the write port
    async def metadata(self) -> dict[str, Any]:
        return dict(self.tables.streams[self.conversation_id].metadata)

    async def request(self, idempotency_key: str) -> StoredRequest | None:
        return self.tables.requests[self.conversation_id].get(idempotency_key)

    async def messages_by_client_id(self, client_ids: Sequence[str]) -> dict[str, StoredMessage]:
        known = self._views.client_ids
        return {
            c: stored_message(self.tables, self.conversation_id, known[c])
            for c in client_ids
            if c in known
        }

    async def messages_written_by(
        self, first_version: int, last_version: int
    ) -> list[StoredMessage]:
        return [
            stored_message(self.tables, self.conversation_id, row.seq)
            for row in sorted(self._views.messages.values(), key=lambda r: r.seq)
            if first_version <= row.event_version <= last_version
        ]

    async def write(self, write: Write) -> None:
        """Applied at once (returns None: the events are recorded at `stream.now`)."""
        if self.remembered:
            raise StaleHead()
        cid, tables = self.conversation_id, self.tables
        assert self._stream is not None
        now = self._stream.now
        record_events(tables, cid, [(e.version, e.type, e.data, now) for e in write.events])
        stream = tables.streams[cid]
        stream.version = write.version or write.events[-1].version
        stream.updated_at = self._stream.now
        apply_changes(tables, cid, write.changes)
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


def record_events(
    tables: Tables, cid: uuid.UUID, events: Sequence[tuple[int, str, Any, datetime]]
) -> None:
    """Add (version, type, data, recorded at) events to the log, in one
    transaction: each takes the next feed position."""
    transaction = next(tables.transactions)
    tables.events[cid].extend(
        EventRecord(
            position=next(tables.positions),
            version=version,
            type=type_,
            data=data,
            recorded_at=recorded_at,
            transaction_id=transaction,
        )
        for version, type_, data, recorded_at in events
    )


class MemoryRebuildSession:
    def __init__(self, tables: Tables, cid: uuid.UUID) -> None:
        self.tables = tables
        self.conversation_id = cid

    async def events(self, after_version: int, limit: int) -> list[Recorded]:
        rows = [e for e in self.tables.events[self.conversation_id] if e.version > after_version]
        return [
            Recorded(version=e.version, recorded_at=e.recorded_at, event=from_data(e.type, e.data))
            for e in rows[:limit]
        ]

    async def apply(self, changes: Changes) -> None:
        apply_changes(self.tables, self.conversation_id, changes)


class MemoryRestoreSession(MemoryRebuildSession):
    """A conversation put back (`Storage.restoring`): its events as they were
    recorded, under one new transaction, then the rebuild's replay."""

    def __init__(self, tables: Tables, cid: uuid.UUID) -> None:
        super().__init__(tables, cid)
        self.version = 0

    async def insert(self, events: Sequence[RestoredEvent]) -> None:
        check_restored_order(self.version, events)
        if not events:
            return
        tables, cid = self.tables, self.conversation_id
        record_events(tables, cid, [(e.version, e.type, e.data, e.recorded_at) for e in events])
        stream = tables.streams[cid]
        if self.version == 0:
            stream.created_at = events[0].recorded_at
        self.version = stream.version = events[-1].version
        stream.updated_at = events[-1].recorded_at
