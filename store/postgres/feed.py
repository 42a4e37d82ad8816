"""The global feed: every event of every conversation, in an order every
reader sees the same, read without ever skipping an event that commits late.

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

from typing import Any

from psycopg import AsyncConnection

from store.records import FeedPosition, RecordedEvent

# Only transactions below our snapshot's xmin are finished for certain.
_HORIZON = "(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint"

READ_FEED = (
    "SELECT position, conversation_id, version, type, data, recorded_at, transaction_id"
    " FROM events WHERE (transaction_id, position) > (%(tx)s, %(pos)s)"
    f" AND transaction_id < {_HORIZON}"
    " ORDER BY transaction_id, position LIMIT %(limit)s"
)

FEED_HEAD = (
    "SELECT coalesce(max(transaction_id), 0), coalesce(max(position), 0) FROM ("
    "  SELECT transaction_id, position FROM events"
    f"  WHERE transaction_id < {_HORIZON}"
    "  ORDER BY transaction_id DESC, position DESC LIMIT 1"
    ") AS last_finished"
)


async def read_feed(
    conn: AsyncConnection[Any], after: FeedPosition, limit: int
) -> list[RecordedEvent]:
    """The next events after `after`, in feed order."""
    cursor = await conn.execute(
        READ_FEED, {"tx": after.transaction_id, "pos": after.position, "limit": limit}
    )
    return [
        RecordedEvent(
            position=position,
            conversation_id=cid,
            version=version,
            type=type_,
            data=data,
            recorded_at=recorded_at,
            transaction_id=transaction_id,
        )
        for position, cid, version, type_, data, recorded_at, transaction_id in (
            await cursor.fetchall()
        )
    ]


async def feed_head(conn: AsyncConnection[Any]) -> FeedPosition:
    """Where a tailing reader that wants only future events starts."""
    cursor = await conn.execute(FEED_HEAD)
    row = await cursor.fetchone()
    assert row is not None
    return FeedPosition(transaction_id=row[0], position=row[1])


# The oldest transaction still open anywhere in the cluster holds the
# horizon back (`pg_snapshot_xmin`); its age is how far behind now the feed is.
FEED_LAG = (
    "SELECT coalesce(extract(epoch FROM now() - min(xact_start)), 0)::float8"
    " FROM pg_stat_activity WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid()"
    " AND backend_xid IS NOT NULL"
)


async def feed_lag(conn: AsyncConnection[Any]) -> float:
    """Seconds the feed's horizon is behind now (0: nothing holds it back)."""
    cursor = await conn.execute(FEED_LAG)
    row = await cursor.fetchone()
    return float(row[0]) if row is not None else 0.0
