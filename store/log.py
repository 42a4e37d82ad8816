"""The append-only event log: append with optimistic concurrency, read a
stream, read the global feed. The only module that knows the locking story.

## Per-conversation concurrency

An append locks its conversation's row (`SELECT … FOR UPDATE`), compares
the version with the caller's expectation, then bumps the version and
inserts the events, all in one transaction. Two writers of one
conversation serialize on that row lock; the loser re-reads the committed
version after the winner commits and gets a `ConcurrencyConflict` naming
both versions. `UNIQUE (conversation_id, version)` is the backstop: should
anything bypass the row lock, the insert fails loudly and is reported as
the same conflict. We never `ON CONFLICT DO NOTHING` an event: that is how
other stores have silently lost events.

Writers of *different* conversations never touch the same row, so they
append in parallel: there is no global write lock.

## The global feed, without a global lock

`position` comes from a sequence. Sequence values are handed out when a
row is inserted, not when its transaction commits, so a reader that says
"give me positions after 41" can read 43 (committed) while 42 is still in
flight, move its checkpoint past 42, and never see it. Every sequence-
numbered store has this bug or stalls behind holes.

We order the feed by `(transaction_id, position)` instead, where
`transaction_id` is the writer's `pg_current_xact_id()`, and a reader only
returns events whose transaction id is below the *xmin* of its own snapshot
(`pg_snapshot_xmin(pg_current_snapshot())`): the oldest transaction still
running anywhere in the cluster. Every transaction below xmin has
finished — committed or rolled back — so nothing can ever appear in the
part of the feed already read; and any transaction still running, or yet to
start, has an id ≥ xmin, so it sorts after everything returned so far. A
reader therefore never skips an event that commits late, and the order is
the same for every reader.

The price: a transaction that stays open holds the feed back for everyone
until it ends (in any database of the cluster). That is why every
connection sets `idle_in_transaction_session_timeout`, and why nothing in
convo-store keeps a transaction open across an LLM call.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store import queries
from store.db import violated_constraint
from store.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationNotFound,
    IdempotencyConflict,
)
from store.records import (
    AppendResult,
    ExpectedVersion,
    FeedPosition,
    NewEvent,
    RecordedEvent,
    StreamState,
    canonical_hash,
)
from store.schema import DEFAULT_TENANT, append_requests, events

FEED_CHANNEL = "convo_events"


def _recorded(row: Row[Any]) -> RecordedEvent:
    return RecordedEvent(
        position=row.position,
        conversation_id=row.conversation_id,
        version=row.version,
        type=row.type,
        data=row.data,
        metadata=row.metadata,
        client_id=row.client_id,
        recorded_at=row.recorded_at,
        transaction_id=row.transaction_id,
    )


async def lock_stream(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    *,
    tenant: str = DEFAULT_TENANT,
    create: bool,
) -> int | None:
    """Lock the conversation's row for this transaction and return its
    version; None when it does not exist and `create` is false.

    With `create`, a missing conversation is created at version 0 (racing
    creators meet on the primary key; the loser's insert waits, then does
    nothing, and both go on to lock the same row). An existing one costs
    no insert: that is the common case, one round trip fewer.
    """
    row = (await conn.execute(queries.LOCK_STREAM, {"id": conversation_id})).one_or_none()
    if row is None and create:
        await conn.execute(queries.CREATE_STREAM, {"id": conversation_id, "tenant": tenant})
        row = (await conn.execute(queries.LOCK_STREAM, {"id": conversation_id})).one_or_none()
    if row is None:
        return None
    if row.tenant != tenant:
        # Another tenant's conversation looks exactly like a missing one.
        raise ConversationNotFound(conversation_id)
    if row.deleted_at is not None:
        raise ConversationDeleted(conversation_id)
    return int(row.version)


def check_expected(
    conversation_id: uuid.UUID, expected: ExpectedVersion, actual: int | None
) -> None:
    """Raise ConcurrencyConflict unless the stream is where the caller expects."""
    if expected is StreamState.ANY:
        return
    if expected is StreamState.NO_STREAM:
        if actual is not None and actual > 0:
            raise ConcurrencyConflict(conversation_id, "no stream", actual)
        return
    if (actual or 0) != expected:
        raise ConcurrencyConflict(conversation_id, expected, actual)


async def write_events(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    current_version: int,
    new_events: Sequence[NewEvent],
) -> list[RecordedEvent]:
    """Insert events after `current_version` of a stream locked by this
    transaction, bump its version, and wake tailing readers."""
    if not new_events:
        return []
    last_version = current_version + len(new_events)
    await conn.execute(
        queries.BUMP_STREAM_VERSION, {"id": conversation_id, "version": last_version}
    )
    rows = [
        {
            "conversation_id": conversation_id,
            "version": current_version + i,
            "type": event.type,
            "data": event.data,
            "metadata": event.metadata,
            "client_id": event.client_id,
        }
        for i, event in enumerate(new_events, start=1)
    ]
    try:
        result = await conn.execute(events.insert().returning(*events.c), rows)
    except IntegrityError as error:
        constraint = violated_constraint(error)
        if constraint == "uq_events_stream_version":
            raise ConcurrencyConflict(conversation_id, current_version, None) from error
        if constraint == "uq_events_client_id":
            raise IdempotencyConflict(
                ",".join(e.client_id for e in new_events if e.client_id),
                "a client id in this append is already used by another event",
            ) from error
        raise
    recorded = sorted((_recorded(r) for r in result), key=lambda e: e.version)
    # A wake-up only: readers poll the feed for truth (see module docstring).
    await conn.execute(queries.NOTIFY_FEED, {"channel": FEED_CHANNEL, "payload": ""})
    return recorded


async def find_replay(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    new_events: Sequence[NewEvent],
    idempotency_key: str | None,
) -> list[RecordedEvent] | None:
    """The events an earlier identical append recorded, if this one is a retry.

    A retry is recognised by its idempotency key, or else by client ids
    that are all already recorded. The same key (or client id) with
    different content is an `IdempotencyConflict`, never a silent answer.
    Call it with the stream locked, so a concurrent first attempt has
    either committed or not started.
    """
    if idempotency_key is not None:
        versions = await find_request(
            conn, conversation_id, idempotency_key, request_hash(new_events)
        )
        if versions is None:
            return None
        return await read_versions(conn, conversation_id, *versions)

    client_ids = [e.client_id for e in new_events if e.client_id is not None]
    if not client_ids:
        return None
    found = {
        r.client_id: _recorded(r)
        for r in await conn.execute(
            select(events).where(
                events.c.conversation_id == conversation_id, events.c.client_id.in_(client_ids)
            )
        )
    }
    if not found:
        return None
    if len(found) != len(new_events) or len(client_ids) != len(new_events):
        missing = [c for c in client_ids if c not in found]
        raise IdempotencyConflict(
            ",".join(sorted(found)),
            "some client ids are already recorded and others are not"
            + (f" (new: {', '.join(missing)})" if missing else ""),
        )
    replay = []
    for event in new_events:
        assert event.client_id is not None
        original = found[event.client_id]
        if (original.type, original.data) != (event.type, event.data):
            raise IdempotencyConflict(event.client_id, "the event differs from the one recorded")
        replay.append(original)
    return replay


async def find_request(
    conn: AsyncConnection, conversation_id: uuid.UUID, idempotency_key: str, hash_: str
) -> tuple[int, int] | None:
    """The versions an earlier request with this key wrote, if any; the same
    key with a different request hash is an IdempotencyConflict."""
    row = (
        await conn.execute(
            select(append_requests).where(
                append_requests.c.conversation_id == conversation_id,
                append_requests.c.idempotency_key == idempotency_key,
            )
        )
    ).one_or_none()
    if row is None:
        return None
    if row.request_hash != hash_:
        raise IdempotencyConflict(idempotency_key, "the request differs from the first one")
    return int(row.first_version), int(row.last_version)


async def remember_request(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    idempotency_key: str,
    hash_: str,
    recorded: Sequence[RecordedEvent],
) -> None:
    await conn.execute(
        append_requests.insert().values(
            conversation_id=conversation_id,
            idempotency_key=idempotency_key,
            request_hash=hash_,
            first_version=recorded[0].version,
            last_version=recorded[-1].version,
        )
    )


def request_hash(new_events: Sequence[NewEvent]) -> str:
    return canonical_hash([[e.type, e.data, e.client_id] for e in new_events])


def replay_result(conversation_id: uuid.UUID, replay: Sequence[RecordedEvent]) -> AppendResult:
    return AppendResult(
        conversation_id=conversation_id,
        first_version=replay[0].version if replay else 0,
        last_version=replay[-1].version if replay else 0,
        positions=tuple(e.position for e in replay),
        replayed=True,
    )


async def read_versions(
    conn: AsyncConnection, conversation_id: uuid.UUID, first: int, last: int
) -> list[RecordedEvent]:
    rows = await conn.execute(
        select(events)
        .where(
            events.c.conversation_id == conversation_id,
            events.c.version.between(first, last),
        )
        .order_by(events.c.version)
    )
    return [_recorded(r) for r in rows]


class EventLog:
    """The event log over an async engine. Each method is one transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @staticmethod
    def recorded_from_row(row: Row[Any]) -> RecordedEvent:
        """A RecordedEvent from a row of `events` (for readers with their own query)."""
        return _recorded(row)

    async def append(
        self,
        conversation_id: uuid.UUID,
        new_events: Sequence[NewEvent],
        *,
        expected_version: ExpectedVersion = StreamState.ANY,
        idempotency_key: str | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> AppendResult:
        """Append events to a conversation's stream, atomically.

        Raises ConcurrencyConflict when the stream is not at
        `expected_version`; a retry with the same idempotency key (or the
        same client ids) returns the original result and writes nothing.
        """
        if not new_events:
            raise ValueError("append needs at least one event")
        try:
            async with self.engine.begin() as conn:
                # "Any", "no stream" and "version 0" may all start a new stream.
                create = expected_version in (StreamState.ANY, StreamState.NO_STREAM, 0)
                current = await lock_stream(conn, conversation_id, tenant=tenant, create=create)
                replay = await find_replay(conn, conversation_id, new_events, idempotency_key)
                if replay is not None:
                    return replay_result(conversation_id, replay)
                if current is None:
                    raise ConcurrencyConflict(conversation_id, expected_version, None)
                check_expected(conversation_id, expected_version, current)
                recorded = await write_events(conn, conversation_id, current, new_events)
                if idempotency_key is not None:
                    await remember_request(
                        conn, conversation_id, idempotency_key, request_hash(new_events), recorded
                    )
        except DBAPIError as error:
            if violated_constraint(error) == "pk_append_requests" and idempotency_key:
                # A concurrent first attempt with this key won; answer as it did.
                return await self._replay(conversation_id, new_events, idempotency_key, tenant)
            raise
        return AppendResult(
            conversation_id=conversation_id,
            first_version=recorded[0].version,
            last_version=recorded[-1].version,
            positions=tuple(e.position for e in recorded),
        )

    async def _replay(
        self, conversation_id: uuid.UUID, new_events: Sequence[NewEvent], key: str, tenant: str
    ) -> AppendResult:
        async with self.engine.begin() as conn:
            await lock_stream(conn, conversation_id, tenant=tenant, create=False)
            replay = await find_replay(conn, conversation_id, new_events, key)
        assert replay is not None
        return replay_result(conversation_id, replay)

    async def stream_version(self, conversation_id: uuid.UUID) -> int | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(queries.STREAM_VERSION, {"id": conversation_id})
            ).one_or_none()
        return None if row is None else int(row.version)

    async def read_stream(
        self, conversation_id: uuid.UUID, *, from_version: int = 1, limit: int | None = None
    ) -> list[RecordedEvent]:
        """Events of one conversation in version order, from `from_version`."""
        query = (
            select(events)
            .where(events.c.conversation_id == conversation_id, events.c.version >= from_version)
            .order_by(events.c.version)
        )
        if limit is not None:
            query = query.limit(limit)
        async with self.engine.connect() as conn:
            return [_recorded(r) for r in await conn.execute(query)]

    async def read_feed(
        self, after: FeedPosition | None = None, *, limit: int = 500
    ) -> list[RecordedEvent]:
        """The next events of the global feed after `after`, in feed order.

        Only events of transactions below the snapshot's xmin are returned
        (see the module docstring), so a later call never finds an event
        that sorts before one already returned.
        """
        after = after or FeedPosition.start()
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                queries.READ_FEED,
                {"tx": after.transaction_id, "pos": after.position, "limit": limit},
            )
            return [_recorded(r) for r in rows]

    async def feed_head(self) -> FeedPosition:
        """The feed position a new tailing reader that wants only future events starts at."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(queries.FEED_HEAD)).one()
        return FeedPosition(transaction_id=row.transaction_id, position=row.position)


__all__ = [
    "FEED_CHANNEL",
    "EventLog",
    "check_expected",
    "find_replay",
    "find_request",
    "lock_stream",
    "remember_request",
    "write_events",
]
