"""`store.repository.port.Storage` on PostgreSQL, over psycopg 3 and its pool.

Round trips are the cost to watch: a single append is two at most.

1. `BEGIN`, the stream row lock (`sql.LOCK_STREAM`: version, views' head,
   role counts, the transaction's time) and the lookups the write named up
   front (the calls its tool results answer, its client ids, its
   idempotency key) go out together in pipeline mode, one sync.
2. The whole write — events, message rows (each also its membership of
   the batch it arrives in, and its role's index entry), tool calls, the
   stream's version and head, the remembered request — is one statement
   (`sql.append_cte`, data-modifying CTEs), sent with `COMMIT`, one sync.

An append to a conversation this storage appended to last (`_Remembered`)
is one: decided on the row as that append left it, it goes out as one
statement in autocommit, the write guarded by the remembered version
(`_OptimisticSession`; docs/storage.md, "Appends in one round trip"), with
the appends to other conversations that wait at the same time
(`store.postgres.group_commit`). Had another write come between, or were
the row locked, the guard writes nothing and the append is decided again,
the two-round-trip way.

Why pipeline mode and a CTE rather than a server-side function: the
decisions (`store.domain.commands`) and the projector stay in Python, shared with
the in-memory storage, and SQL only writes the rows it is given; psycopg
prepares each statement shape at its first use on a connection, so the
server plans none of them again. A server function would have moved the
projection into PL/pgSQL — a second implementation to keep equal to the
fake's.

Reads go out in one sync too: the conversation's row (does it exist, for
this tenant, not deleted) and the read itself, pipelined. A short read (the
last N, a role's n-th..m-th) carries that check in its own statement
(`sql.READABLE`) and goes out alone; only an empty answer reads the row too.

Per-conversation concurrency.

An append locks its conversation's row (`sql.LOCK_STREAM`: `SELECT … FOR UPDATE`), compares
the version with the caller's expectation, then bumps the version and
inserts the events, all in one transaction. Two writers of one
conversation serialize on that row lock; the loser re-reads the committed
version after the winner commits and gets a `ConcurrencyConflict` naming
both versions. The events' primary key `(conversation_id, version)` is the backstop: should
anything bypass the row lock, the insert fails loudly and is reported as
the same conflict. We never `ON CONFLICT DO NOTHING` an event: that is how
other stores have silently lost events.

Writers of *different* conversations never touch the same row, so they
append in parallel: there is no global write lock.

Every exception that escapes a transaction goes through
`store.postgres.driver_errors.translate`: the store's callers only ever see
`store.domain.errors`.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from operator import itemgetter
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import AsyncConnection, AsyncCursor, AsyncPipeline
from psycopg.adapt import Loader
from psycopg.pq import Format
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from store.domain.codec import StoredWindow, collector_paused, decode_stored_rows, message_text
from store.domain.commands import Head
from store.domain.context import AgentProfile, ContextSlots, default_profile, slots_from_values
from store.domain.errors import ConversationDeleted, ConversationNotFound, InvalidOperation
from store.domain.events import from_data
from store.domain.feed import (
    ChangedConversation,
    FeedEvent,
    FeedPage,
    event_from_row,
)
from store.domain.listing import ConversationCursor, ConversationQuery, Listed
from store.domain.messages import ROLES, Role, StoredMessage
from store.domain.projector import (
    AppendMessages,
    Archive,
    Changes,
    ConfigureAgent,
    CopyForked,
    EditMessage,
    PinMessage,
    PurgeViews,
    Recorded,
    SetMetadata,
    SetSlot,
    StartBatch,
    StartViews,
    Step,
    ViewHead,
)
from store.domain.records import FeedPosition, RecordedEvent
from store.domain.search import SearchPage, SearchQuery
from store.domain.validation import CallState
from store.domain.values import Batch, Conversation, ToolBlock
from store.domain.window import WindowEntry
from store.postgres import feed, search, sql
from store.postgres.driver_errors import translate
from store.postgres.feed_signal import FeedSignal
from store.postgres.group_commit import WRITERS, GroupCommit, GuardedAppend, rows_json
from store.postgres.pooled import pooled
from store.postgres.urls import libpq_url
from store.repository.port import (
    NO_LOOKUPS,
    AssemblyInput,
    CandidateCursor,
    CandidateQuery,
    CompactionCandidate,
    ForkSource,
    HistoryPage,
    Lookups,
    StaleHead,
    StoredRequest,
    StreamRow,
    WindowPage,
    Write,
    fork_windows,
)

Row = tuple[Any, ...]
T = TypeVar("T")

# Every session starts with these (see docs/operations.md): appends are
# short; a statement or a lock wait that runs long means something is wrong,
# and an idle transaction holds back the global feed for every reader.
DEFAULT_OPTIONS = (
    "-c statement_timeout=30000 -c lock_timeout=5000 -c idle_in_transaction_session_timeout=60000"
)
# And, whatever the caller's options, no JIT compilation: the store's
# statements are short index reads and writes, and a window read whose plan
# the planner costed high (a branch it would never run included) spent ~20 ms
# compiling expressions for a 2 ms read. No memoizing of look-ups either: a
# window read member by member looks up each message and event once, and the
# cache in front of each look-up was 18% of that read. And times in UTC:
# every time the store keeps is an instant, so the zone only decides how it
# is written back, and in UTC it is the same whatever zone the server is
# configured with. psycopg reads a session in `UTC` with the standard
# library's `timezone.utc`; in another zone (this project's server says
# `Etc/UTC`) it converts each value with a `ZoneInfo`, 0.6 µs more per
# time read: 5% of reading the last 50 messages.
SESSION_OPTIONS = "-c jit=off -c enable_memoize=off -c TimeZone=UTC"


def _json(value: Any) -> str:
    # Non-finite numbers are not JSON: refused here rather than stored as null.
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


class _JsonLoader(Loader):
    """`json`/`jsonb` values (text format) straight into `orjson.loads`,
    which takes the driver's buffer as it is: no Python call in between,
    as `set_json_loads` has (~6% of a 5,000-message read)."""

    load = staticmethod(orjson.loads)  # type: ignore[assignment]  # takes str too


class _JsonBinaryLoader(_JsonLoader):
    """`json` in binary format, which is its text: the same."""

    format = Format.BINARY


async def _configure(conn: AsyncConnection[Any]) -> None:
    # JSON from the server is decoded by orjson: a 5,000-message window is
    # 5,000 bodies, and the standard library's decoder was a third of a read.
    conn.adapters.register_loader("json", _JsonLoader)
    conn.adapters.register_loader("jsonb", _JsonLoader)
    conn.adapters.register_loader("json", _JsonBinaryLoader)
    # Prepare every statement at its first use rather than its fifth: the
    # statements are a fixed set of shapes, and a pool hands each request
    # the connection used longest ago, so with 30 connections the default
    # threshold left most of a busy minute's appends parsed and planned anew.
    conn.prepare_threshold = 0


def _message(row: Row) -> StoredMessage:
    """A message from a row of `sql.MESSAGE_COLUMNS` (and any columns after)."""
    return decode_stored_rows((row,))[0]


def _in_window_order(rows: list[Row]) -> list[Row]:
    """A whole window's rows, which the server sends in no order, sorted by
    their window key: the last two columns, the message's seq and, where it
    differs, its sort key (`sql._one_of` says why). Python compares an int
    with a Decimal exactly."""
    inserted = list(map(itemgetter(-1), rows))
    if inserted.count(None) == len(inserted):  # the usual window: keys are seqs
        rows.sort(key=itemgetter(-2))
    else:
        rows.sort(key=_window_key)
    return rows


def _window_key(row: Row) -> Any:
    inserted = row[-1]
    return row[-2] if inserted is None else inserted


def _check_readable(conversation_id: uuid.UUID, tenant: str, row: Row | None) -> Row:
    if row is None or row[0] != tenant or row[1] == 0:
        # Another tenant's conversation looks exactly like a missing one.
        raise ConversationNotFound(conversation_id)
    if row[2]:
        raise ConversationDeleted(conversation_id)
    return row


def _raise_ours(error: Exception, conversation_id: uuid.UUID | None) -> None:
    ours = translate(error, conversation_id=conversation_id)
    if ours is not None:
        raise ours from error


async def _rollback(conn: AsyncConnection[Any], error: BaseException) -> None:
    """End a transaction this module began by hand, if it is still open.

    After a database error the connection is closed instead (the pool
    replaces it), as `store.postgres.pooled` says why.
    """
    if isinstance(error, psycopg.Error):
        await conn.close()
        return
    if conn.info.transaction_status in (
        psycopg.pq.TransactionStatus.INTRANS,
        psycopg.pq.TransactionStatus.INERROR,
    ):
        # A broken connection: the pool discards it.
        with contextlib.suppress(psycopg.Error):
            await conn.execute("ROLLBACK")


# --- writing --------------------------------------------------------------------


def _events_params(write: Write) -> dict[str, Any]:
    return {
        "events": rows_json(
            [{"version": e.version, "type": e.type, "data": e.data} for e in write.events]
        )
    }


def _append_params(step: AppendMessages) -> dict[str, Any]:
    return {
        "messages": rows_json([r.__dict__ for r in step.messages]),
        "calls": rows_json([c.__dict__ for c in step.calls]),
        "answers": rows_json([a.__dict__ for a in step.answered]),
    }


def _head_params(cid: uuid.UUID, version: int, head: ViewHead) -> dict[str, Any]:
    counts = head.role_counts
    return {
        "cid": cid,
        "version": version,
        "next_seq": head.next_seq,
        "current_batch": head.current_batch,
        "role_counts": "{" + ",".join(str(counts[role]) for role in ROLES) + "}",
    }


def _agent_batches(cid: uuid.UUID, head: ViewHead) -> tuple[str, dict[str, Any]]:
    return sql.SET_AGENT_BATCHES, {"cid": cid, "agent_batches": Jsonb(head.agent_batches)}


def _step_statements(cid: uuid.UUID, step: Step) -> list[tuple[str, dict[str, Any]]]:
    """The statements that write one projection step."""
    match step:
        case StartViews():
            return [
                (sql.START_VIEWS, {"cid": cid, "at": step.started_at, "version": step.version}),
                (sql.SET_METADATA, {"cid": cid, "metadata": Jsonb(step.metadata, dumps=_json)}),
            ]
        case AppendMessages():
            params = {"cid": cid, **_append_params(step)}
            statements = [sql.INSERT_MESSAGES]
            if step.calls:
                statements.append(sql.INSERT_CALLS)
            if step.answered:
                statements.append(sql.ANSWER_CALLS)
            return [(s, params) for s in statements]
        case EditMessage():
            params = {
                "cid": cid,
                "seq": step.seq,
                "version": step.edit_version,
                "tokens": step.token_estimate,
            }
            return [(sql.EDIT_MESSAGE, params)]
        case StartBatch():
            batch = {
                "cid": cid,
                "agent": step.agent_id,
                "batch": step.batch,
                "boundary": step.boundary,
                "summary": step.summary_seq,
                "retained": Jsonb(list(step.retained)),
                "operation": step.operation,
                "parameters": Jsonb(step.parameters, dumps=_json),
                "at": step.started_at,
                "version": step.version,
            }
            copy = {
                "cid": cid,
                "agent": step.agent_id,
                "batch": step.batch,
                "source": step.source_batch,
                "boundary": step.boundary,
                "retained": list(step.retained),
            }
            return [(sql.INSERT_BATCH, batch), (sql.COPY_MEMBERS, copy)]
        case ConfigureAgent():
            params = {
                "cid": cid,
                "agent": step.agent_id,
                "sub": step.is_sub_agent,
                "prompt": step.system_prompt,
                "role": step.role_definition,
                "version": step.version,
            }
            if step.role_definition_only:
                return [(sql.UPSERT_ROLE_DEFINITION, params)]
            return [(sql.UPSERT_PROFILE, params)]
        case SetSlot():
            key = {"cid": cid, "agent": step.agent_id, "slot": step.slot}
            if step.value is None:
                return [(sql.DELETE_SLOT, key)]
            value = Jsonb(step.value, dumps=_json)
            return [(sql.UPSERT_SLOT, {**key, "value": value, "version": step.version})]
        case Archive():
            return [(sql.ARCHIVE, {"cid": cid, "at": step.archived_at})]
        case SetMetadata():
            return [(sql.SET_METADATA, {"cid": cid, "metadata": Jsonb(step.metadata, dumps=_json)})]
        case PurgeViews():
            return [(statement, {"cid": cid}) for statement in sql.DELETE_VIEWS]
        case PinMessage():
            return [(sql.PIN_MESSAGE, {"cid": cid, "seq": step.seq, "pinned": step.pinned})]
        case CopyForked():
            params = {
                "cid": cid,
                "parent": step.parent,
                "up_to": step.up_to_seq,
                "agent": step.agent_id,
                "first": step.first_version,
                "count": step.messages,
            }
            return [(sql.COPY_FORKED, params)]


def _request_row(write: Write) -> dict[str, Any]:
    """The remembered request's columns (`sql.REQUEST_INSERT`), if any."""
    if write.request is None:
        return {}
    key, stored = write.request
    return {
        "key": key,
        "hash": stored.request_hash,
        "first": stored.first_version,
        "last": stored.last_version,
    }


def _new_version(write: Write) -> int:
    """The stream's version once `write` is recorded."""
    return write.version or write.events[-1].version


def _only_messages(write: Write) -> AppendMessages | None:
    """The append step of a write of appended messages (None: no message)."""
    steps = write.changes.steps
    assert len(steps) <= 1, "one append step at most"
    step = steps[0] if steps else None
    assert step is None or isinstance(step, AppendMessages)
    return step


def _write_statements(cid: uuid.UUID, write: Write) -> list[tuple[str, dict[str, Any]]]:
    """A write under the stream's lock as statements: one, for appended
    messages (the hot path)."""
    changes = write.changes
    head = _head_params(cid, _new_version(write), changes.head)
    request = _request_row(write)
    steps = changes.steps
    if all(isinstance(s, AppendMessages) for s in steps) and len(steps) <= 1:
        appended = _only_messages(write)
        statement = sql.append_cte(
            with_messages=appended is not None,
            calls=bool(appended and appended.calls),
            answers=bool(appended and appended.answered),
            request=bool(request),
        )
        params = {**head, **_events_params(write), **request}
        if appended is not None:
            params.update(_append_params(appended))
        return [(statement, params)]
    statements = [(sql.INSERT_EVENTS, {"cid": cid, **_events_params(write)})]
    for step in steps:
        statements += _step_statements(cid, step)
    statements.append((sql.HEAD_UPDATE, head))
    statements.append(_agent_batches(cid, changes.head))
    if request:
        statements.append((sql.REQUEST_INSERT, {"cid": cid, **request}))
    return statements


def _guarded_append(cid: uuid.UUID, write: Write, *, expected: int) -> GuardedAppend:
    """An optimistic append of messages, written only while the stream is
    at version `expected` (and, with an idempotency key or client ids, only
    if they are new): `sql.append_cte(guarded=True)`."""
    step = _only_messages(write)
    head = write.changes.head
    request = _request_row(write)
    messages = [] if step is None else step.messages
    client_ids = [r.client_message_id for r in messages if r.client_message_id is not None]
    return GuardedAppend(
        conversation_id=cid,
        head={
            "cid": cid,
            "expected": expected,
            "version": _new_version(write),
            "next_seq": head.next_seq,
            "current_batch": head.current_batch,
            "role_counts": [head.role_counts[role] for role in ROLES],
            "key": request.get("key"),
            "client_ids": client_ids or None,
        },
        events=[
            {"cid": cid, "version": e.version, "type": e.type, "data": e.data} for e in write.events
        ],
        messages=[{**r.__dict__, "cid": cid} for r in messages],
        calls=[] if step is None else [{**c.__dict__, "cid": cid} for c in step.calls],
        answers=[] if step is None else [{**a.__dict__, "cid": cid} for a in step.answered],
        request={**request, "cid": cid} if request else None,
    )


def _is_append(write: Write) -> bool:
    """Messages appended, and nothing else (what `append_messages` writes)."""
    steps = write.changes.steps
    return write.version is None and all(isinstance(s, AppendMessages) for s in steps)


@dataclass(frozen=True, kw_only=True)
class _Remembered:
    """What this storage knows of a conversation after its last append
    there: enough to decide the next append without reading the row
    (docs/storage.md, "Appends in one round trip")."""

    tenant: str
    version: int
    head: ViewHead
    # The calls still unanswered that this storage saw made or looked up
    # (call id → agent): a tool result for one of them is decided from here.
    pending: Mapping[str, str]
    # How often lately another write had come between this storage's
    # appends (another process writes the conversation too): from
    # MAX_STRIKES on, an optimistic append would mostly cost a round trip
    # more, so appends read the row first until the other writer stops.
    strikes: int = 0

    def answers(self, tenant: str, lookups: Lookups) -> bool:
        """Can the append with `lookups` be decided from memory alone? Not
        with a result for a call not known to be pending. (With client ids
        or an idempotency key it is decided as a first attempt, and written
        only if it is one: `sql.append_cte`.)"""
        return tenant == self.tenant and lookups.answered_call_ids <= self.pending.keys()

    def after(self, write: Write, stream_version: int) -> _Remembered | None:
        """What is known after `write` (an append at `stream_version`), if
        still worth keeping."""
        pending = dict(self.pending)
        for step in write.changes.steps:
            assert isinstance(step, AppendMessages)
            for call in step.calls:
                if call.result_seq is None:
                    pending[call.call_id] = call.agent_id
            for answered in step.answered:
                pending.pop(answered.call_id, None)
        if len(pending) > MAX_REMEMBERED_CALLS:
            return None
        return _Remembered(
            tenant=self.tenant,
            version=stream_version + len(write.events),
            head=write.changes.head,
            pending=pending,
        )


AUTOVACUUM_OFF = (
    "autovacuum is off on this server: table statistics go stale, and a conversation that"
    " grew by thousands of messages since the last ANALYZE can be planned as if it were"
    " empty (reads and batch operations on it slow down until they time out); turn"
    " autovacuum on, or run ANALYZE after bulk loads (docs/operations.md, 'Statistics')"
)

# How many conversations a storage remembers (most recently appended to
# first), at most how many of a conversation's unanswered calls, and after
# how many writes from elsewhere it stops appending optimistically.
MAX_REMEMBERED = 10_000
MAX_REMEMBERED_CALLS = 256
MAX_STRIKES = 2


class _OptimisticSession:
    """An append decided on what the storage remembers of the conversation
    (`_Remembered`), sent as one statement in autocommit: the append guarded
    by the remembered version (`sql.append_cte(guarded=True)`), which locks
    the row as it updates it. Whatever the decision asks that memory cannot
    answer raises `StaleHead` before anything is sent; a row found at
    another version means nothing was written (the guard), and raises it
    after."""

    remembered = True

    def __init__(self, group: GroupCommit, cid: uuid.UUID, memory: _Remembered) -> None:
        self.group = group
        self.conversation_id = cid
        self.memory = memory
        self.written: Write | None = None
        self.moved = False  # the row was found at another version: nothing written
        self._stream = StreamRow(
            tenant=memory.tenant,
            version=memory.version,
            deleted=False,
            archived=False,
            head=memory.head,
            # Replaced by the transaction's own time once written (`write`).
            now=datetime.now(UTC),
        )

    @property
    def stream(self) -> StreamRow:
        return self._stream

    async def head(self) -> Head:
        return self.memory.head.for_decisions()

    async def calls(self, call_ids: set[str]) -> dict[str, CallState]:
        # A call not known to be pending is taken to be new: were its id in
        # use, the tool_calls primary key refuses the write (`StaleHead`).
        pending = self.memory.pending
        return {i: CallState(agent_id=pending[i], answered=False) for i in call_ids if i in pending}

    async def write(self, write: Write) -> datetime:
        append = _guarded_append(self.conversation_id, write, expected=self.memory.version)
        recorded_at = await self.group.write(append)
        if recorded_at is None:  # another write came between: nothing was written
            self.moved = True
            raise StaleHead()
        self.written = write
        return recorded_at

    # An idempotency key or client ids are taken to be new: the write is
    # guarded by their being so, and a retry is answered the way that reads
    # the row first (`StaleHead`), which finds the first attempt's messages.
    async def request(self, idempotency_key: str) -> StoredRequest | None:
        return None

    async def messages_by_client_id(self, client_ids: Sequence[str]) -> dict[str, StoredMessage]:
        return {}

    async def _unanswerable(self, *_: Any, **__: Any) -> Any:
        raise StaleHead()

    # What an append never asks (read under the lock by `_WriteSession`).
    pending_call_ids = window = batch_window = key_after = key_before = message = _unanswerable
    messages_written_by = fork_source = purge = _unanswerable


class _WriteSession:
    """One write transaction on a locked stream row (see the module docstring)."""

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

    def _params(self, **values: Any) -> dict[str, Any]:
        return {"cid": self.conversation_id, **values}

    async def open(self, tenant: str, create: str | None, lookups: Lookups) -> None:
        conn = self.conn
        await conn.execute("BEGIN")
        if create is not None:
            await conn.execute(sql.CREATE_STREAM, self._params(tenant=tenant, key=create))
        lock = await conn.execute(sql.LOCK_STREAM, self._params())
        calls = clients = request = None
        if lookups.call_ids:
            calls = await conn.execute(sql.CALL_STATES, self._params(ids=sorted(lookups.call_ids)))
        if lookups.client_ids:
            ids = list(lookups.client_ids)
            clients = await conn.execute(sql.MESSAGES_BY_CLIENT_ID, self._params(ids=ids))
        if lookups.idempotency_key is not None:
            key = lookups.idempotency_key
            request = await conn.execute(sql.REQUEST, self._params(key=key))
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
        rows = await self._rows(sql.CALL_STATES, self._params(ids=sorted(call_ids)))
        return _call_states(rows)

    async def pending_call_ids(self, agent_id: str | None = None) -> set[str]:
        return {r[0] for r in await self._rows(sql.PENDING_CALLS, self._params(agent=agent_id))}

    async def window(self, agent_id: str) -> list[WindowEntry]:
        window = await self.batch_window((await self.head()).batch_of(agent_id), agent_id)
        assert window is not None
        return window

    async def batch_window(
        self, batch: int, agent_id: str | None = None
    ) -> list[WindowEntry] | None:
        key = (batch, agent_id)
        if key not in self._windows:
            params = self._params(batch=batch, agent=agent_id)
            owner = await self.conn.execute(sql.BATCH_OWNER, params)
            entries = await self.conn.execute(sql.WINDOW_ENTRIES, params)
            await self.pipeline.sync()
            found = await owner.fetchone()
            rows = await entries.fetchall()
            readable = found is not None and (found[0] is None or found[0] == agent_id)
            self._windows[key] = [_window_entry(r) for r in rows] if readable else None
        return self._windows[key]

    async def fork_source(
        self, parent: uuid.UUID, tenant: str, up_to_seq: int | None, agent_id: str | None
    ) -> ForkSource:
        params = {
            "parent": parent,
            "up_to": sql.NO_SEQ_ABOVE if up_to_seq is None else up_to_seq,
            "agent": agent_id,
        }
        cursors = [
            await self.conn.execute(statement, params)
            for statement in (
                sql.FORK_PARENT,
                sql.FORK_COUNTS,
                sql.FORK_PROFILES,
                sql.FORK_SLOTS,
                sql.FORK_WINDOWS,
            )
        ]
        await self.pipeline.sync()
        row, counts, profiles, slots, windows = [await c.fetchall() for c in cursors]
        _, version, _, next_seq = _check_readable(parent, tenant, row[0] if row else None)
        up_to = next_seq - 1 if up_to_seq is None else up_to_seq
        if up_to >= next_seq:
            raise InvalidOperation(
                f"fork up_to_seq {up_to} is past the parent's last message (seq {next_seq - 1})"
            )
        messages, last_seq, pinned, *by_role = counts[0]
        return ForkSource(
            version=version,
            up_to_seq=up_to,
            messages=messages,
            last_seq=last_seq,
            pinned=pinned,
            role_counts=dict(zip(ROLES, by_role, strict=True)),
            profiles=tuple(_profile(r[0], [r[1:]]) for r in profiles),
            slots=tuple((agent, slot, value) for agent, slot, value in slots),
            windows=fork_windows(windows),
        )

    async def key_after(self, key: Decimal) -> Decimal | None:
        rows = await self._rows(sql.KEY_AFTER, self._params(key=key))
        return None if rows[0][0] is None else Decimal(rows[0][0])

    async def key_before(self, key: Decimal) -> Decimal | None:
        rows = await self._rows(sql.KEY_BEFORE, self._params(key=key))
        return None if rows[0][0] is None else Decimal(rows[0][0])

    async def message(self, seq: int) -> StoredMessage | None:
        rows = await self._rows(sql.MESSAGE_BY_SEQ, self._params(seq=seq))
        return _message(rows[0]) if rows else None

    # the rest of the write port
    async def request(self, idempotency_key: str) -> StoredRequest | None:
        if self._request is not None and self._request[0] == idempotency_key:
            return self._request[1]
        rows = await self._rows(sql.REQUEST, self._params(key=idempotency_key))
        return _stored_request(rows[0] if rows else None)

    async def messages_by_client_id(self, client_ids: Sequence[str]) -> dict[str, StoredMessage]:
        if self._clients is not None and set(client_ids) <= self._looked_up_clients:
            return {c: m for c, m in self._clients.items() if c in client_ids}
        rows = await self._rows(sql.MESSAGES_BY_CLIENT_ID, self._params(ids=list(client_ids)))
        return {r[8]: _message(r) for r in rows}

    async def messages_written_by(
        self, first_version: int, last_version: int
    ) -> list[StoredMessage]:
        params = self._params(first=first_version, last=last_version)
        return decode_stored_rows(await self._rows(sql.MESSAGES_WRITTEN_BY, params))

    async def write(self, write: Write) -> None:
        # Queued, not synced: the statements go out with COMMIT.
        for statement, params in _write_statements(self.conversation_id, write):
            await self.conn.execute(statement, params)
        self.written = write

    def remembered_after(self, previous: _Remembered | None) -> _Remembered | None:
        """What to remember after this session's append committed: the
        row as it now is, and the unanswered calls it knows of."""
        write, stream = self.written, self._stream
        if write is None or stream is None or not _is_append(write):
            return None
        if previous is None or previous.version != stream.version:
            pending = {i: s.agent_id for i, s in self._calls.items() if not s.answered}
            previous = _Remembered(
                tenant=stream.tenant, version=stream.version, head=stream.head, pending=pending
            )
        return previous.after(write, stream.version)

    async def purge(self) -> None:
        for statement in (*sql.DELETE_VIEWS, *sql.PURGE):
            await self.conn.execute(statement, self._params())


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


class _RebuildSession:
    def __init__(self, conn: AsyncConnection[Any], cid: uuid.UUID, version: int) -> None:
        self.conn = conn
        self.conversation_id = cid
        self.version = version

    async def events(self, after_version: int, limit: int) -> list[Recorded]:
        cursor = await self.conn.execute(
            sql.EVENTS_AFTER, {"cid": self.conversation_id, "after": after_version, "limit": limit}
        )
        return [
            Recorded(version=v, recorded_at=at, event=from_data(type_, data))
            for v, at, type_, data in await cursor.fetchall()
        ]

    async def apply(self, changes: Changes) -> None:
        cid = self.conversation_id
        for step in changes.steps:
            for statement, params in _step_statements(cid, step):
                await self.conn.execute(statement, params)
        await self.conn.execute(
            sql.REBUILD_HEAD_UPDATE, _head_params(cid, self.version, changes.head)
        )
        await self.conn.execute(*_agent_batches(cid, changes.head))


# --- the storage ---------------------------------------------------------------------


class PostgresStorage:
    """The storage port on PostgreSQL. Open it with `connect`, close it with `close`."""

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], *, writers: int = WRITERS
    ) -> None:
        self.pool = pool
        self._feed_signal = FeedSignal(pool)
        self._group_commit = GroupCommit(pool, writers=writers)
        # Conversations this storage appended to, most recent last.
        self._remembered: OrderedDict[uuid.UUID, _Remembered] = OrderedDict()

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        options: str = DEFAULT_OPTIONS,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 5.0,  # noqa: ASYNC109 - the pool's wait, not this call's
        writers: int = WRITERS,
    ) -> PostgresStorage:
        """A storage with its own connection pool on the database at `url`.

        `timeout` is how long a caller waits for a free connection before
        `StorageUnavailable`; `max_size` bounds the connections it opens;
        `writers` how many statements of optimistic appends are in flight
        at once (`store.postgres.group_commit`).
        """
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            libpq_url(url),
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": True, "options": f"{options} {SESSION_OPTIONS}"},
            configure=_configure,
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=timeout)
        except Exception as error:
            await pool.close()
            _raise_ours(error, None)
            raise
        return cls(pool, writers=writers)

    async def close(self) -> None:
        await self._group_commit.close()
        await self._feed_signal.close()
        await self.pool.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection outside any conversation, errors translated."""
        try:
            async with pooled(self.pool) as conn:
                yield conn
        except Exception as error:
            _raise_ours(error, None)
            raise

    async def feed_lag(self) -> float:
        async with self._connection() as conn:
            return await feed.feed_lag(conn)

    async def ping(self) -> None:
        """One trivial query: does the database answer? (`/ready`)"""
        async with self._connection() as conn:
            await conn.execute("SELECT 1")

    async def server_warnings(self) -> list[str]:
        """What in the server's settings an operator should hear of at
        startup (docs/operations.md, "Statistics")."""
        async with self._connection() as conn:
            cursor = await conn.execute("SELECT current_setting('autovacuum')")
            row = await cursor.fetchone()
        return [AUTOVACUUM_OFF] if row is not None and row[0] == "off" else []

    # --- writes ------------------------------------------------------------------

    @asynccontextmanager
    async def writing(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        *,
        create: str | None = None,
        lookups: Lookups = NO_LOOKUPS,
        optimistic: bool = False,
    ) -> AsyncIterator[_WriteSession | _OptimisticSession]:
        remembered = self._remembered.pop(conversation_id, None)
        session: _WriteSession | _OptimisticSession | None = None
        try:
            if (
                optimistic
                and create is None
                and remembered is not None
                and remembered.strikes < MAX_STRIKES
                and remembered.answers(tenant, lookups)
            ):
                # One statement, sent by its write (with whatever other
                # conversations' appends wait then), or nothing at all.
                session = _OptimisticSession(self._group_commit, conversation_id, remembered)
                try:
                    yield session
                except BaseException as error:
                    if session.moved:
                        # Kept for the retry under the lock, which finds the
                        # row past it and counts the strike.
                        self._remembered[conversation_id] = session.memory
                    if isinstance(error, psycopg.errors.UniqueViolation):
                        # A new call's id was in use after all: decide
                        # again under the lock, which says so properly.
                        raise StaleHead() from error
                    raise
            else:
                async with self.pool.connection() as conn:
                    try:
                        async with conn.pipeline() as pipeline:
                            session = _WriteSession(conn, pipeline, conversation_id)
                            await session.open(tenant, create, lookups)
                            yield session
                            # Sent with the write's statements: leaving the
                            # pipeline syncs once and raises what failed.
                            await conn.execute("COMMIT")
                    except BaseException as error:
                        await _rollback(conn, error)
                        raise
        except Exception as error:
            _raise_ours(error, conversation_id)
            raise
        assert session is not None
        if session.written is not None:
            self._feed_signal.committed()
        self._remember(conversation_id, session, remembered)

    def _remember(
        self,
        conversation_id: uuid.UUID,
        session: _WriteSession | _OptimisticSession,
        previous: _Remembered | None,
    ) -> None:
        """After a committed write: remember the conversation if it was an
        append (the next one can then go out in one round trip), else
        forget it (popped at the write's start: a failure forgets it too,
        but for an optimistic append that found the row moved on, kept for
        its retry)."""
        if isinstance(session, _OptimisticSession):
            written = session.written
            previous = session.memory
            after = None if written is None else previous.after(written, previous.version)
            came_between = False  # the guard held
        else:
            after = session.remembered_after(previous)
            stream = session.stream
            came_between = (
                previous is not None and stream is not None and previous.version != stream.version
            )
        if after is None:
            return
        # Another write between this storage's appends is a strike; an
        # append with none between takes one off.
        strikes = 0 if previous is None else previous.strikes + (1 if came_between else -1)
        after = replace(after, strikes=max(0, min(MAX_STRIKES, strikes)))
        remembered = self._remembered
        known = remembered.get(conversation_id)
        if known is not None and known.version > after.version:
            return  # a later append of this process got here first
        remembered[conversation_id] = after
        remembered.move_to_end(conversation_id)
        if len(remembered) > MAX_REMEMBERED:
            remembered.popitem(last=False)

    @asynccontextmanager
    async def rebuilding(self, conversation_id: uuid.UUID) -> AsyncIterator[_RebuildSession]:
        try:
            async with self.pool.connection() as conn:
                try:
                    await conn.execute("BEGIN")
                    cursor = await conn.execute(sql.LOCK_STREAM, {"cid": conversation_id})
                    row = await cursor.fetchone()
                    if row is None:
                        raise ConversationNotFound(conversation_id)
                    for statement in (*sql.DELETE_VIEWS, sql.RESET_HEAD):
                        await conn.execute(statement, {"cid": conversation_id})
                    yield _RebuildSession(conn, conversation_id, row[1])
                    await conn.execute("COMMIT")
                except BaseException as error:
                    await _rollback(conn, error)
                    raise
        except Exception as error:
            _raise_ours(error, conversation_id)
            raise

    # --- reads --------------------------------------------------------------------

    async def _read(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        *statements: tuple[str, Mapping[str, Any]],
    ) -> tuple[Row, list[list[Row]]]:
        """The conversation's row (checked) and each statement's rows, one sync."""
        return await self._read_into(conversation_id, tenant, statements, lambda row, found: found)

    async def _read_into(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        statements: Sequence[tuple[str, Mapping[str, Any]]],
        decode: Callable[[Row, list[list[Row]]], T],
        *,
        window: tuple[Mapping[bool, str], Mapping[str, Any]] | None = None,
    ) -> tuple[Row, T]:
        """`_read`, the rows made into values by `decode(row, found)`: the
        collector is paused from when they are here until they are values,
        and they are gone before it runs again, so its next pass never walks
        them (store.domain.codec, `collector_paused`). The pause starts after the
        pipeline's sync, so it spans no query and no wait for a connection,
        only the connection's return (its commit); the decoding runs after
        that return, not holding a connection of the pool.

        `window`: an agent's whole window read last, (`sql.AGENT_WINDOW` or
        another such pair, its parameters with `agent`): the statement for
        the batch the conversation's row names (`sql.agent_window_of`), sent
        once that row is here: one round trip more."""
        try:
            with contextlib.ExitStack() as pause:
                async with pooled(self.pool) as conn:
                    async with conn.pipeline():
                        if window is None:
                            head = await conn.execute(sql.CONVERSATION, {"cid": conversation_id})
                        else:
                            head = await conn.execute(sql.CONVERSATION_OF_AGENT, window[1])
                        cursors = [await conn.execute(s, p) for s, p in statements]
                        if window is not None:
                            # Fetching flushes the pipeline: the row is here
                            # after one round trip, the statements before it too.
                            row = _check_readable(conversation_id, tenant, await head.fetchone())
                            statements_by_first, params = window
                            cursors.append(
                                await conn.execute(
                                    statements_by_first[row[-1] == 1], {**params, "batch": row[-1]}
                                )
                            )
                    if window is None:  # leaving the pipeline synced it: the row is here
                        row = _check_readable(conversation_id, tenant, await head.fetchone())
                    pause.enter_context(collector_paused())
                    found = [await c.fetchall() for c in cursors]
                values = decode(row, found)
                del found
            return row, values
        except Exception as error:
            _raise_ours(error, conversation_id)
            raise

    async def _messages(
        self, conversation_id: uuid.UUID, tenant: str, statement: str, **params: Any
    ) -> list[StoredMessage]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (statement, {"cid": conversation_id, **params})
        )
        return decode_stored_rows(rows)

    async def _checked_messages(
        self, conversation_id: uuid.UUID, tenant: str, statement: str, **params: Any
    ) -> list[StoredMessage]:
        """Messages from a statement that checks the tenant's right to read
        itself (`sql.READABLE`): one statement, without the pipeline `_read`
        needs for two, which was a fifth of a short page's time. Only an empty
        answer reads the conversation's row, to tell a missing or deleted
        conversation (an error) from an empty page."""
        try:
            async with pooled(self.pool) as conn:
                # Rows in binary: numbers, times and flags without parsing
                # their text (a message's body, `json`, is its text either
                # way). 3% of the last 50 messages' read. Every statement
                # here returns `sql.MESSAGE_COLUMNS` and numbers: a column of
                # one of our enum types would come back as bytes.
                cursor = conn.cursor(binary=True)
                await cursor.execute(
                    statement, {"cid": conversation_id, "tenant": tenant, **params}
                )
                with collector_paused():
                    rows = await cursor.fetchall()
        except Exception as error:
            _raise_ours(error, conversation_id)
            raise
        if not rows:
            await self._read(conversation_id, tenant)
            return []
        return decode_stored_rows(rows)

    async def conversation(self, conversation_id: uuid.UUID, tenant: str) -> Conversation:
        row, _ = await self._read(conversation_id, tenant)
        _, version, _, current_batch, next_seq, archived, created_at, metadata, updated_at = row[:9]
        return Conversation(
            id=row[9],
            tenant=tenant,
            version=version,
            current_batch=current_batch,
            next_seq=next_seq,
            archived=archived,
            started_at=created_at,
            metadata=metadata,
            updated_at=updated_at,
        )

    async def window(
        self, conversation_id: uuid.UUID, tenant: str, *, batch: int | None, agent_id: str | None
    ) -> list[StoredMessage]:
        def decode(_: Row, found: list[list[Row]]) -> list[StoredMessage]:
            return decode_stored_rows(_in_window_order(found[0]))

        if batch is None and agent_id is not None:
            params = {"cid": conversation_id, "agent": agent_id}
            _, messages = await self._read_into(
                conversation_id, tenant, [], decode, window=(sql.AGENT_WINDOW, params)
            )
            return messages
        statement = sql.window(batch=batch is not None, agent=agent_id is not None)
        params = {"cid": conversation_id, "batch": batch, "agent": agent_id}
        _, messages = await self._read_into(conversation_id, tenant, [(statement, params)], decode)
        return messages

    async def recent_in_window(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        return await self._checked_messages(
            conversation_id,
            tenant,
            sql.recent_in_window(agent=agent_id is not None),
            role=role,
            n=n,
            agent=agent_id,
        )

    async def recent_in_history(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        return await self._checked_messages(
            conversation_id,
            tenant,
            sql.recent_in_history(role),
            n=n,
            agent=agent_id,
            **sql.ALL_ORDINALS,
        )

    async def role_range(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        return await self._checked_messages(
            conversation_id, tenant, sql.role_range(role), first=first, last=last
        )

    async def count_in_window(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (sql.COUNT_IN_WINDOW, {"cid": conversation_id})
        )
        found = {r[0]: int(r[1]) for r in rows}
        return {role: found.get(role, 0) for role in ROLES}

    async def count_in_history(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (sql.COUNT_IN_HISTORY, {"cid": conversation_id})
        )
        return {role: int(n) for role, n in zip(ROLES, rows[0][0], strict=True)}

    async def history(
        self, conversation_id: uuid.UUID, tenant: str, page: HistoryPage
    ) -> list[StoredMessage]:
        statement = sql.history(
            descending=page.descending,
            visible=page.visible_only,
            role=page.role,
            agent=page.agent_id is not None,
            kind=page.kind is not None,
        )
        return await self._checked_messages(
            conversation_id,
            tenant,
            statement,
            after=-1 if page.after_seq is None else page.after_seq,
            before=sql.NO_SEQ_ABOVE if page.before_seq is None else page.before_seq,
            limit=page.limit,
            agent=page.agent_id,
            kind=page.kind,
        )

    async def window_page(
        self, conversation_id: uuid.UUID, tenant: str, page: WindowPage
    ) -> list[tuple[Decimal, StoredMessage]]:
        params = {
            "cid": conversation_id,
            "batch": page.batch,
            "agent": page.agent_id,
            "after": Decimal(-1) if page.after_key is None else page.after_key,
            "limit": page.limit,
        }
        statement = sql.window(
            batch=page.batch is not None, agent=page.agent_id is not None, page=True
        )
        _, (rows,) = await self._read(conversation_id, tenant, (statement, params))
        return list(zip((Decimal(r[8]) for r in rows), decode_stored_rows(rows), strict=True))

    async def list_conversations(self, tenant: str, query: ConversationQuery) -> list[Listed]:
        statement = sql.list_conversations(
            newest=query.order == "newest",
            metadata=query.metadata is not None,
            archived=query.archived,
            created_from=query.created_from is not None,
            created_to=query.created_to is not None,
            updated_from=query.updated_from is not None,
            updated_to=query.updated_to is not None,
            after=query.after is not None,
        )
        params: dict[str, Any] = {
            "tenant": tenant,
            "metadata": None if query.metadata is None else Jsonb(query.metadata, dumps=_json),
            "created_from": query.created_from,
            "created_to": query.created_to,
            "updated_from": query.updated_from,
            "updated_to": query.updated_to,
            "after_at": None if query.after is None else query.after.created_at,
            "after_id": None if query.after is None else query.after.id,
            "limit": query.limit,
        }
        return [
            Listed(
                conversation=Conversation(
                    id=key,
                    tenant=tenant_,
                    version=version,
                    current_batch=current_batch,
                    next_seq=next_seq,
                    archived=archived,
                    started_at=created_at,
                    metadata=metadata,
                    updated_at=updated_at,
                ),
                cursor=ConversationCursor(created_at=created_at, id=internal_id),
            )
            for (
                key,
                tenant_,
                version,
                current_batch,
                next_seq,
                archived,
                created_at,
                metadata,
                updated_at,
                internal_id,
            ) in await self._rows(statement, params)
        ]

    async def tool_blocks(
        self, conversation_id: uuid.UUID, tenant: str, *, pending_only: bool, agent_id: str | None
    ) -> list[ToolBlock]:
        params = {"cid": conversation_id, "pending": pending_only, "agent": agent_id}
        _, (rows,) = await self._read(conversation_id, tenant, (sql.TOOL_BLOCKS, params))
        return [
            ToolBlock(
                call_id=call_id,
                tool_name=name,
                arguments=arguments or {},
                agent_id=agent,
                assistant_seq=assistant_seq,
                result_seq=result_seq,
                status=status,
                is_error=is_error,
            )
            for call_id, name, arguments, agent, assistant_seq, result_seq, status, is_error in rows
        ]

    async def batch_messages(
        self, conversation_id: uuid.UUID, tenant: str, batch: int
    ) -> list[StoredMessage]:
        return await self._messages(conversation_id, tenant, sql.BATCH_MESSAGES, batch=batch)

    async def batches(self, conversation_id: uuid.UUID, tenant: str) -> list[Batch]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (sql.BATCHES, {"cid": conversation_id})
        )
        return [
            Batch(
                number=number,
                boundary=Decimal(boundary),
                summary_seq=summary_seq,
                retained=tuple(retained),
                operation=operation,
                parameters=parameters,
                started_at=started_at,
                agent_id=agent_id,
            )
            for (
                number,
                boundary,
                summary_seq,
                retained,
                operation,
                parameters,
                started_at,
                agent_id,
            ) in rows
        ]

    async def agent(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> tuple[AgentProfile, ContextSlots]:
        params = {"cid": conversation_id, "agent": agent_id}
        _, (profile, slots) = await self._read(
            conversation_id, tenant, (sql.PROFILE, params), (sql.SLOTS, params)
        )
        return _profile(agent_id, profile), slots_from_values(dict(slots))

    async def assembly_input(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> AssemblyInput:
        params = {"cid": conversation_id, "agent": agent_id}

        # The window stays its rows (sorted): the assembler renders a plain
        # window from their JSON, decoding none (store.assembler.plain).
        def decode(_: Row, found: list[list[Row]]) -> tuple[Any, Any, StoredWindow]:
            profile, slots, window = found
            return profile, slots, StoredWindow(_in_window_order(window))

        _, (profile, slots, messages) = await self._read_into(
            conversation_id,
            tenant,
            [(sql.PROFILE, params), (sql.SLOTS, params)],
            decode,
            window=(sql.ASSEMBLY_WINDOW, params),
        )
        return AssemblyInput(
            window=messages,
            profile=_profile(agent_id, profile),
            slots=slots_from_values(dict(slots)),
        )

    # --- search (store.domain.search, store.postgres.search) ---

    async def search_messages(self, tenant: str, query: SearchQuery) -> SearchPage:
        async with self._connection() as conn:
            return await search.search_messages(conn, tenant, query)

    # --- the log ---------------------------------------------------------------------

    async def _rows(self, statement: str, params: Mapping[str, Any]) -> list[Row]:
        async with self._connection() as conn:
            cursor = await conn.execute(statement, params)
            return await cursor.fetchall()

    async def read_feed(self, after: FeedPosition, limit: int) -> list[RecordedEvent]:
        async with self._connection() as conn:
            return await feed.read_feed(conn, after, limit)

    async def feed_head(self) -> FeedPosition:
        async with self._connection() as conn:
            return await feed.feed_head(conn)

    async def conversation_ids(self) -> list[uuid.UUID]:
        return [r[0] for r in await self._rows(sql.CONVERSATION_IDS, {})]

    # --- compaction ------------------------------------------------------------------

    async def compaction_candidates(
        self, tenant: str, query: CandidateQuery
    ) -> list[CompactionCandidate]:
        statement = sql.compaction_candidates(
            max_messages=query.max_messages is not None,
            max_tokens=query.max_tokens is not None,
            after=query.after is not None,
        )
        params = {
            "tenant": tenant,
            "agent": query.agent_id,
            "max_messages": query.max_messages,
            "max_tokens": query.max_tokens,
            "after_at": None if query.after is None else query.after.created_at,
            "after_id": None if query.after is None else query.after.stream,
            "limit": query.limit,
        }
        return [
            CompactionCandidate(
                conversation_id=key,
                version=version,
                messages=int(messages),
                tokens=int(tokens),
                cursor=CandidateCursor(created_at=created_at, stream=stream),
            )
            for key, version, created_at, stream, messages, tokens in await self._rows(
                statement, params
            )
        ]

    @asynccontextmanager
    async def try_claim(self, name: str) -> AsyncIterator[bool]:
        """A session advisory lock held on a connection of its own, outside
        any transaction, for as long as the claim lasts (see
        store.compaction.job for why not a row lock)."""
        async with self._connection() as conn:
            cursor = await conn.execute(sql.TRY_CLAIM, {"name": name})
            row = await cursor.fetchone()
            claimed = bool(row and row[0])
            try:
                yield claimed
            finally:
                if claimed:
                    try:
                        await conn.execute(sql.RELEASE_CLAIM, {"name": name})
                    except BaseException:
                        # Never hand a connection still holding the lock back
                        # to the pool: closing it releases the lock.
                        await conn.close()
                        raise

    async def count_events(self, conversation_id: uuid.UUID | None = None) -> int:
        (row,) = await self._rows(sql.COUNT_EVENTS, {"cid": conversation_id})
        return int(row[0])

    # --- export and the tenant feed (store.domain.feed, store.repository.export) ---

    async def tenant_feed(self, tenant: str, after: FeedPosition, limit: int) -> FeedPage:
        async with self._connection() as conn:
            return await feed.read_tenant_feed(conn, tenant, after, limit)

    async def conversation_events(
        self, conversation_id: uuid.UUID, tenant: str, after_version: int, limit: int
    ) -> list[FeedEvent]:
        params = {"cid": conversation_id, "after": after_version, "limit": limit}
        _, (rows,) = await self._read(conversation_id, tenant, (sql.CONVERSATION_EVENTS, params))
        return [
            event_from_row(
                conversation=key,
                transaction_id=tx,
                position=position,
                version=version,
                type_=type_,
                data=data,
                recorded_at=recorded_at,
            )
            for tx, position, version, type_, data, recorded_at, key in rows
        ]

    async def changed_conversations(
        self, tenant: str, since: datetime, after: uuid.UUID | None, limit: int
    ) -> list[ChangedConversation]:
        params = {"tenant": tenant, "since": since, "after": after or uuid.UUID(int=0)}
        rows = await self._rows(sql.CHANGED_CONVERSATIONS, {**params, "limit": limit})
        return [
            ChangedConversation(id=cid, key=key, updated_at=updated_at)
            for cid, key, updated_at in rows
        ]

    async def wait_for_feed(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        # Woken by LISTEN/NOTIFY, sent off the append's path: store.postgres.feed_signal.
        await self._feed_signal.wait(timeout)


def _profile(agent_id: str, rows: list[Row]) -> AgentProfile:
    if not rows:
        return default_profile(agent_id)
    is_sub_agent, system_prompt, role_definition = rows[0]
    return AgentProfile(
        agent_id=agent_id,
        is_sub_agent=is_sub_agent,
        system_prompt=system_prompt,
        role_definition=role_definition,
    )


__all__ = ["DEFAULT_OPTIONS", "PostgresStorage"]
