"""A write on PostgreSQL under the conversation's row lock: the session
`Storage.writing` yields unless an append goes out optimistically
(`optimistic`), and what a decision may ask of it.

Round trips are the cost to watch: a write under the lock is two.

1. `BEGIN`, the stream row lock (`LOCK_STREAM`: version, views' head, role
   counts, the transaction's time) and the lookups the write named up
   front (the calls its tool results answer, its client ids, its
   idempotency key) go out together in pipeline mode, one sync.
2. The whole write — for appended messages events, message rows (each also
   its membership of the batch it arrives in, and its role's index entry),
   tool calls, the stream's version and head, the remembered request — is
   one statement (`append_sql.append_cte`, data-modifying CTEs), sent with
   `COMMIT`, one sync.

Why pipeline mode and a CTE rather than a server-side function: the
decisions (`store.domain.commands`) and the projector stay in Python,
shared with the in-memory storage, and SQL only writes the rows it is
given; psycopg prepares each statement shape at its first use on a
connection, so the server plans none of them again. A server function
would have moved the projection into PL/pgSQL — a second implementation to
keep equal to the fake's.

Per-conversation concurrency. A write locks its conversation's row
(`LOCK_STREAM`: `SELECT … FOR UPDATE`), compares the version with the
caller's expectation, then bumps the version and inserts the events, all
in one transaction. Two writers of one conversation serialize on that row
lock; the loser re-reads the committed version after the winner commits
and gets a `ConcurrencyConflict` naming both versions. The events' primary
key `(conversation_id, version)` is the backstop: should anything bypass
the row lock, the insert fails loudly and is reported as the same
conflict. We never `ON CONFLICT DO NOTHING` an event: that is how other
stores have silently lost events.

Writers of *different* conversations never touch the same row, so they
write in parallel: there is no global write lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from psycopg import AsyncConnection, AsyncCursor, AsyncPipeline

from store.domain.codec import decode_stored_rows, message_text
from store.domain.commands import Head
from store.domain.messages import ROLES, StoredMessage
from store.domain.projector import ViewHead
from store.domain.validation import CallState
from store.domain.window import WindowEntry
from store.postgres.forks import read_fork_source
from store.postgres.pooled import Row
from store.postgres.shared_sql import EDIT, MEMBER_SOURCES, MESSAGE_COLUMNS, PROBE_EVENTS
from store.postgres.write_statements import DELETE_VIEWS, write_statements
from store.repository.port import (
    CurrentWindow,
    ForkSource,
    Lookups,
    StoredRequest,
    StreamRow,
    Write,
)

# --- the stream row -------------------------------------------------------------------

# The stream row, not an event: DO NOTHING here only means "it exists".
CREATE_STREAM = (
    "INSERT INTO conversations (id, tenant, key) VALUES (%(cid)s, %(tenant)s, %(key)s)"
    " ON CONFLICT (id) DO NOTHING"
)

# Locks the stream row for this transaction (writers of one conversation
# queue here; other conversations are not touched) and returns what every
# decision starts from: the version, the views' head (next seq, current
# batch, each role's message count), the transaction's time. A statement
# that waited for the lock re-reads the locked row, so all of it is as the
# previous writer committed it.
LOCK_STREAM = (
    "SELECT tenant, version, deleted_at IS NOT NULL, archived_at IS NOT NULL,"
    " next_seq, current_batch, role_counts, now(), agent_batches"
    " FROM conversations WHERE id = %(cid)s FOR UPDATE"
)

# --- what a decision may ask under the lock ----------------------------------------------

CALL_STATES = (
    "SELECT call_id, agent_id, status = 'complete' FROM tool_calls"
    " WHERE conversation_id = %(cid)s AND call_id = ANY(%(ids)s)"
)

PENDING_CALLS = (
    "SELECT call_id FROM tool_calls WHERE conversation_id = %(cid)s AND status = 'pending'"
    " AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)"
)

METADATA = "SELECT metadata FROM conversations WHERE id = %(cid)s"

# The request an idempotency key was first used for.
REQUEST = (
    "SELECT request_hash, first_version, last_version FROM append_requests"
    " WHERE conversation_id = %(cid)s AND idempotency_key = %(key)s"
)

MESSAGE_BY_SEQ = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s AND m.seq = %(seq)s"
)

MESSAGES_BY_CLIENT_ID = (
    f"SELECT {MESSAGE_COLUMNS}, m.client_message_id FROM messages AS m{PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s AND m.client_message_id = ANY(%(ids)s)"
)

MESSAGES_WRITTEN_BY = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s"
    " AND m.event_version BETWEEN %(first)s AND %(last)s ORDER BY m.seq"
)

# The nearest sort keys around `key`: the nearest ordinary message (its key
# is its seq: the primary key) or inserted one (the partial index), whichever
# is nearer.
KEY_AFTER = (
    "SELECT least("
    "(SELECT min(sort_key) FROM messages"
    "  WHERE conversation_id = %(cid)s AND sort_key > %(key)s AND sort_key <> seq),"
    "(SELECT seq FROM messages WHERE conversation_id = %(cid)s AND seq > %(key)s"
    "  AND sort_key = seq ORDER BY seq LIMIT 1))"
)
KEY_BEFORE = (
    "SELECT greatest("
    "(SELECT max(sort_key) FROM messages"
    "  WHERE conversation_id = %(cid)s AND sort_key < %(key)s AND sort_key <> seq),"
    "(SELECT seq FROM messages WHERE conversation_id = %(cid)s AND seq < %(key)s"
    "  AND sort_key = seq ORDER BY seq DESC LIMIT 1))"
)

# What a batch operation decides on: the window's entries, bodies included
# (a filter reads the text). It runs once per operation, so every row is read
# by its key (a probe each), whatever the statistics say: a conversation they
# do not know yet is estimated at a row or two, and a join planned for that
# read a long conversation once per message, past the statement timeout
# (docs/operations.md, "Statistics").
_ENTRY_COLUMNS = f"b.seq, b.sort_key, m.role, m.agent_id, m.tool_call_id, e.data, {EDIT}"
_ENTRY_CONDITIONS = (
    "b.conversation_id = %(cid)s AND b.batch = %(batch)s"
    " AND (%(agent)s::text IS NULL OR m.agent_id = %(agent)s)"
)
WINDOW_ENTRIES = (
    " UNION ALL ".join(
        f"SELECT {_ENTRY_COLUMNS} FROM {source}{PROBE_EVENTS} WHERE {_ENTRY_CONDITIONS}"
        for source in MEMBER_SOURCES
    )
    + " ORDER BY 2"
)

# Whose window a batch is (NULL: every agent's); no row: no such batch.
BATCH_OWNER = "SELECT agent_id FROM batches WHERE conversation_id = %(cid)s AND batch = %(batch)s"

# A purge deletes the conversation's views (`write_statements.DELETE_VIEWS`),
# then these; the stream row stays, as a tombstone.
PURGE = (
    "DELETE FROM append_requests WHERE conversation_id = %(cid)s",
    "DELETE FROM events WHERE conversation_id = %(cid)s",
    "UPDATE conversations SET deleted_at = now(), metadata = '{}' WHERE id = %(cid)s",
)


class WriteSession(CurrentWindow):
    """One write transaction on a locked stream row (the module docstring)."""

    remembered = False

    def __init__(self, conn: AsyncConnection[Any], pipeline: AsyncPipeline, cid: uuid.UUID) -> None:
        self.conn = conn
        self.pipeline = pipeline
        self.conversation_id = cid
        self._stream: StreamRow | None = None
        self._calls: dict[str, CallState] = {}
        self._looked_up_calls: frozenset[str] = frozenset()
        self._clients: dict[str, StoredMessage] | None = None
        self._looked_up_clients: frozenset[str] = frozenset()
        self._request: tuple[str, StoredRequest | None] | None = None
        self._windows: dict[tuple[int, str | None], list[WindowEntry] | None] = {}
        self.written: Write | None = None

    @property
    def stream(self) -> StreamRow | None:
        return self._stream

    @property
    def known_calls(self) -> Mapping[str, CallState]:
        """The calls this session looked up with the lock (`Lookups.call_ids`)."""
        return self._calls

    def _params(self, **values: Any) -> dict[str, Any]:
        return {"cid": self.conversation_id, **values}

    async def open(self, tenant: str, create: str | None, lookups: Lookups) -> None:
        conn = self.conn
        await conn.execute("BEGIN")
        if create is not None:
            await conn.execute(CREATE_STREAM, self._params(tenant=tenant, key=create))
        lock = await conn.execute(LOCK_STREAM, self._params())
        calls = clients = request = None
        if lookups.call_ids:
            calls = await conn.execute(CALL_STATES, self._params(ids=sorted(lookups.call_ids)))
        if lookups.client_ids:
            ids = list(lookups.client_ids)
            clients = await conn.execute(MESSAGES_BY_CLIENT_ID, self._params(ids=ids))
        if lookups.idempotency_key is not None:
            key = lookups.idempotency_key
            request = await conn.execute(REQUEST, self._params(key=key))
        await self.pipeline.sync()
        row = await lock.fetchone()
        if row is not None:
            tenant_, version, deleted, archived, next_seq, batch, role_counts, now, agents = row
            self._stream = StreamRow(
                tenant=tenant_,
                version=version,
                deleted=deleted,
                archived=archived,
                head=ViewHead(
                    next_seq=next_seq,
                    current_batch=batch,
                    role_counts=dict(zip(ROLES, role_counts, strict=True)),
                    agent_batches=agents,
                ),
                now=now,
            )
        if calls is not None:
            self._calls = _call_states(await calls.fetchall())
            self._looked_up_calls = lookups.call_ids
        if clients is not None:
            self._clients = {r[8]: _message(r) for r in await clients.fetchall()}
            self._looked_up_clients = frozenset(lookups.client_ids)
        if request is not None:
            assert lookups.idempotency_key is not None
            found = await request.fetchone()
            self._request = (lookups.idempotency_key, _stored_request(found))

    async def _rows(self, statement: str, params: Mapping[str, Any]) -> list[Row]:
        cursor: AsyncCursor[Row] = await self.conn.execute(statement, params)
        await self.pipeline.sync()
        return await cursor.fetchall()

    # ConversationState
    async def head(self) -> Head:
        assert self._stream is not None
        return self._stream.head.for_decisions()

    async def calls(self, call_ids: set[str]) -> dict[str, CallState]:
        if not call_ids:
            return {}
        if call_ids <= self._looked_up_calls:
            return {i: s for i, s in self._calls.items() if i in call_ids}
        rows = await self._rows(CALL_STATES, self._params(ids=sorted(call_ids)))
        return _call_states(rows)

    async def pending_call_ids(self, agent_id: str | None = None) -> set[str]:
        return {r[0] for r in await self._rows(PENDING_CALLS, self._params(agent=agent_id))}

    async def batch_window(
        self, batch: int, agent_id: str | None = None
    ) -> list[WindowEntry] | None:
        key = (batch, agent_id)
        if key not in self._windows:
            params = self._params(batch=batch, agent=agent_id)
            owner = await self.conn.execute(BATCH_OWNER, params)
            entries = await self.conn.execute(WINDOW_ENTRIES, params)
            await self.pipeline.sync()
            found = await owner.fetchone()
            rows = await entries.fetchall()
            readable = found is not None and (found[0] is None or found[0] == agent_id)
            self._windows[key] = [_window_entry(r) for r in rows] if readable else None
        return self._windows[key]

    async def fork_source(
        self, parent: uuid.UUID, tenant: str, up_to_seq: int | None, agent_id: str | None
    ) -> ForkSource:
        return await read_fork_source(self.conn, self.pipeline, parent, tenant, up_to_seq, agent_id)

    async def key_after(self, key: Decimal) -> Decimal | None:
        return await self._nearest_key(KEY_AFTER, key)

    async def key_before(self, key: Decimal) -> Decimal | None:
        return await self._nearest_key(KEY_BEFORE, key)

    async def _nearest_key(self, statement: str, key: Decimal) -> Decimal | None:
        rows = await self._rows(statement, self._params(key=key))
        return None if rows[0][0] is None else Decimal(rows[0][0])

    async def message(self, seq: int) -> StoredMessage | None:
        rows = await self._rows(MESSAGE_BY_SEQ, self._params(seq=seq))
        return _message(rows[0]) if rows else None

    # the rest of the write port
    async def metadata(self) -> dict[str, Any]:
        rows = await self._rows(METADATA, self._params())
        metadata: dict[str, Any] = rows[0][0]
        return metadata

    async def request(self, idempotency_key: str) -> StoredRequest | None:
        if self._request is not None and self._request[0] == idempotency_key:
            return self._request[1]
        rows = await self._rows(REQUEST, self._params(key=idempotency_key))
        return _stored_request(rows[0] if rows else None)

    async def messages_by_client_id(self, client_ids: Sequence[str]) -> dict[str, StoredMessage]:
        if self._clients is not None and set(client_ids) <= self._looked_up_clients:
            return {c: m for c, m in self._clients.items() if c in client_ids}
        rows = await self._rows(MESSAGES_BY_CLIENT_ID, self._params(ids=list(client_ids)))
        return {r[8]: _message(r) for r in rows}

    async def messages_written_by(
        self, first_version: int, last_version: int
    ) -> list[StoredMessage]:
        params = self._params(first=first_version, last=last_version)
        return decode_stored_rows(await self._rows(MESSAGES_WRITTEN_BY, params))

    async def write(self, write: Write) -> None:
        # Queued, not synced: the statements go out with COMMIT.
        for statement, params in write_statements(self.conversation_id, write):
            await self.conn.execute(statement, params)
        self.written = write

    async def purge(self) -> None:
        for statement in (*DELETE_VIEWS, *PURGE):
            await self.conn.execute(statement, self._params())


def _message(row: Row) -> StoredMessage:
    """A message from a row of `MESSAGE_COLUMNS` (and any columns after)."""
    return decode_stored_rows((row,))[0]


def _call_states(rows: Sequence[Row]) -> dict[str, CallState]:
    return {r[0]: CallState(agent_id=r[1], answered=r[2]) for r in rows}


def _stored_request(row: Row | None) -> StoredRequest | None:
    if row is None:
        return None
    return StoredRequest(request_hash=row[0], first_version=row[1], last_version=row[2])


def _window_entry(row: Row) -> WindowEntry:
    seq, sort_key, role, agent_id, answers, appended, edit = row
    body = appended["message"]
    edited = None if edit is None else edit["content"]
    return WindowEntry(
        seq=seq,
        sort_key=Decimal(sort_key),
        role=role,
        agent_id=agent_id,
        text=message_text(body, edited),
        call_ids=tuple(c["id"] for c in body.get("tool_calls") or ()),
        answers=answers,
    )
