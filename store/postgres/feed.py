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

A tenant's page, an export's changed conversations, and the wait of a
caught-up tail (`feed_signal`) are here too: everything that reads the
log across conversations.

One server is one partition of the feed (`FEED_PARTITION`): a reader's
place is a vector of per-partition positions (store.domain.feed_vector),
of which this server reads and moves its own entry.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime

from store.domain.feed import (
    ChangedConversation,
    FeedEvent,
    FeedPage,
    event_from_row,
    scan_limit,
)
from store.domain.feed_vector import FIRST_PARTITION, FeedVector
from store.domain.records import FeedPosition, RecordedEvent
from store.postgres.feed_signal import FeedSignal
from store.postgres.pooled import Pooled, Row

# The partition of the feed this server is: its transaction ids order it.
FEED_PARTITION = FIRST_PARTITION
# An event read outside a page (one conversation's, an export's) is checkpointed
# as a vector naming only this partition.
_ALONE = FeedVector.origin().stamper(FEED_PARTITION)

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

# The oldest transaction still open anywhere in the cluster holds the
# horizon back (`pg_snapshot_xmin`); its age is how far behind now the feed is.
FEED_LAG = (
    "SELECT coalesce(extract(epoch FROM now() - min(xact_start)), 0)::float8"
    " FROM pg_stat_activity WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid()"
    " AND backend_xid IS NOT NULL"
)

# --- one tenant's feed (store.domain.feed) ------------------------------------------------
#
# Events have no tenant column: each scanned event is joined to its stream row
# (primary key) for the tenant. The scan is bounded (`scan`): a page returns
# the tenant's events among at most `scan` events of the global feed, and
# ends at the last event it scanned, so a quiet tenant moves past the others'
# events. Besides the tenant's events (`mine`) the page's last scanned event
# comes back, without its data, as the next checkpoint: the last event before
# the tenant's `limit + 1`-th (`n`, the tenant's events so far, and whether
# the next scanned one is the tenant's), or the scan's last (no next one).
# Its number in the scan (`i`) says whether the scan was used up.
#
# One pass in feed order: the scan is an index range already in that order,
# and the window functions read it as it comes (no sort), stopping at the
# tenant's `limit + 1`-th event. Written as CTEs the scan was materialised,
# data and all, sorted again for the window and counted, and spilled to disk
# (docs/export-and-feed.md, "Pages").
# The conversation is named by its client's id (`conversations.key`).
READ_TENANT_FEED = (
    "SELECT transaction_id, position, conversation, version, type,"
    " CASE WHEN mine THEN data END, recorded_at, mine, i"
    " FROM ("
    "  SELECT *, count(*) FILTER (WHERE mine) OVER w AS n, row_number() OVER w AS i,"
    "   lead(mine) OVER w AS next_mine"
    "  FROM ("
    "   SELECT e.transaction_id, e.position, e.version, e.type, e.data, e.recorded_at,"
    "    c.tenant = %(tenant)s AS mine, c.key AS conversation"
    "   FROM events AS e JOIN conversations AS c ON c.id = e.conversation_id"
    "   WHERE (e.transaction_id, e.position) > (%(tx)s, %(pos)s)"
    f"   AND e.transaction_id < {_HORIZON}"
    "   ORDER BY e.transaction_id, e.position LIMIT %(scan)s"
    "  ) AS scanned WINDOW w AS (ORDER BY transaction_id, position)"
    " ) AS counted"
    " WHERE n <= %(limit)s AND (mine OR next_mine IS NULL OR (next_mine AND n = %(limit)s))"
    " ORDER BY transaction_id, position"
)


# A tenant's conversations changed since a time, by id, keyset: a
# conversation changed during an export neither moves nor repeats.
# `updated_at` is filtered, not indexed (see schema.conversations).
CHANGED_CONVERSATIONS = (
    "SELECT id, key, updated_at FROM conversations"
    " WHERE tenant = %(tenant)s AND updated_at >= %(since)s AND deleted_at IS NULL"
    " AND version > 0 AND id > %(after)s ORDER BY id LIMIT %(limit)s"
)


def feed_event(row: Row, stamp: Callable[[int, int], str] = _ALONE) -> FeedEvent:
    """An event of a tenant's feed or of an export, from its row's first
    seven columns: transaction, position, conversation (its client's id),
    version, type, data, time; `stamp` makes its checkpoint from its
    transaction and position."""
    tx, position, conversation, version, type_, data, recorded_at = row[:7]
    return event_from_row(
        conversation=conversation,
        checkpoint=stamp(tx, position),
        version=version,
        type_=type_,
        data=data,
        recorded_at=recorded_at,
    )


class FeedReads(Pooled):
    """The storage port's reads of the log across conversations
    (`storage.PostgresStorage`)."""

    _feed_signal: FeedSignal
    feed_partitions: tuple[str, ...] = (FEED_PARTITION,)

    async def read_feed(self, after: FeedPosition, limit: int) -> list[RecordedEvent]:
        """The next events after `after`, in feed order."""
        params = {"tx": after.transaction_id, "pos": after.position, "limit": limit}
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
                await self._analyst_rows(READ_FEED, params)
            )
        ]

    async def feed_head(self) -> FeedVector:
        """Where a tailing reader that wants only future events starts."""
        async with self._connection() as conn:
            cursor = await conn.execute(FEED_HEAD)
            row = await cursor.fetchone()
        assert row is not None
        return FeedVector.single(FeedPosition(transaction_id=row[0], position=row[1]))

    async def feed_lag(self) -> float:
        """Seconds the feed's horizon is behind now (0: nothing holds it back)."""
        async with self._connection() as conn:
            cursor = await conn.execute(FEED_LAG)
            row = await cursor.fetchone()
        return float(row[0]) if row is not None else 0.0

    async def tenant_feed(self, tenant: str, after: FeedVector, limit: int) -> FeedPage:
        """The tenant's next events after `after`, and where the next page starts."""
        scan = scan_limit(limit)
        start = after.at(FEED_PARTITION)
        params = {
            "tenant": tenant,
            "tx": start.transaction_id,
            "pos": start.position,
            "scan": scan,
            "limit": limit,
        }
        rows = await self._analyst_rows(READ_TENANT_FEED, params)
        stamp = after.stamper(FEED_PARTITION)
        events = [feed_event(row, stamp) for row in rows if row[7]]  # the tenant's: `mine`
        # The last row is the last scanned, unless the page filled up first.
        scanned = rows[-1][-1] if rows else 0
        return FeedPage(
            events=events,
            next=stamp(rows[-1][0], rows[-1][1]) if rows else after.token(),
            more=scanned >= scan or len(events) >= limit,
        )

    async def changed_conversations(
        self, tenant: str, since: datetime, after: uuid.UUID | None, limit: int
    ) -> list[ChangedConversation]:
        params = {"tenant": tenant, "since": since, "after": after or uuid.UUID(int=0)}
        rows = await self._analyst_rows(CHANGED_CONVERSATIONS, {**params, "limit": limit})
        return [
            ChangedConversation(id=cid, key=key, updated_at=updated_at)
            for cid, key, updated_at in rows
        ]

    async def wait_for_feed(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        # Woken by LISTEN/NOTIFY, sent off the append's path (`feed_signal`).
        started = time.monotonic()
        await self._feed_signal.wait(timeout)
        if self.replicas is not None:  # the next page is read on a standby: once it has them
            await self.replicas.caught_up(max(0.0, timeout - (time.monotonic() - started)))
