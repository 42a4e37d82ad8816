"""A tenant's event feed, for downstream consumers: pages, checkpoints, the tail.

The global feed (store.postgres.feed) orders every event of every tenant by
`(transaction_id, position)` and never returns an event of a transaction
that might still commit below what it already returned. A tenant reads the
same feed with the other tenants' events filtered out *in SQL*: the events
table has no tenant column, so a page joins each event to its
conversation's stream row (`conversations.tenant`, by primary key).

A checkpoint is a reader's place in the feed: a vector of positions, one
per partition, as an opaque token (store.domain.feed_vector; a single server
is one partition). A page scans at most `scan_limit(limit)`
events of the global feed and returns the tenant's among them, at most
`limit`; its `next` checkpoint is the last event it *scanned*, so a reader of
a quiet tenant moves past the other tenants' events instead of scanning them
again, and never waits on an unbounded scan. (The checkpoint shows how far
the whole feed has gone, not what the other tenants wrote.)

The live tail (`Repository.tail`) reads pages until it is current, then waits for the
storage to say the feed may have moved (`Storage.wait_for_feed`).

How a tail is woken. PostgreSQL: by LISTEN/NOTIFY, with the NOTIFY sent
by each process after its writes commit, never inside a writer's
transaction (a `pg_notify` there would serialise every append's commit:
bench/export_feed.py measures it as `notify_cost`); the reasons and the
safety re-read are in `store.postgres.feed_signal`. The in-memory storage
wakes waiters at once (an `asyncio.Condition`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from store.domain.codec import with_kind
from store.domain.errors import InvalidOperation

MAX_FEED_LIMIT = 1000
SCAN_FACTOR = 10  # a page scans at most this many global events per event it may return
HEARTBEAT_SECONDS = 15.0


def scan_limit(limit: int) -> int:
    """How many events of the global feed a page of `limit` scans at most."""
    return limit * SCAN_FACTOR


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_FEED_LIMIT:
        raise InvalidOperation(f"limit must be 1..{MAX_FEED_LIMIT}, got {limit}")


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FeedEvent(_Value):
    """One event as a downstream consumer sees it."""

    checkpoint: str = Field(description="Its place in the feed: resume after it with this.")
    conversation_id: str = Field(description="The conversation's id, as its client named it.")
    version: int = Field(description="The conversation's version this event made (1-based).")
    type: str = Field(description="The event's type, e.g. `message_appended`.")
    recorded_at: datetime
    data: dict[str, Any]


class FeedPage(_Value):
    """A page of a tenant's feed and where the next one starts."""

    events: list[FeedEvent]
    next: str = Field(description="The checkpoint to read on from (`after`).")
    more: bool = Field(
        description="True when the page stopped at its limit or its scan bound:"
        " read on at once. False: the feed is read to its current end."
    )


class ConversationEvents(_Value):
    """A page of one conversation's events, by version."""

    events: list[FeedEvent]
    next_from_version: int = Field(description="The `from_version` of the next page.")


class ChangedConversation(_Value):
    """A conversation a tenant changed: its ids and when it last changed."""

    id: uuid.UUID
    key: str
    updated_at: datetime


def event_from_row(
    *,
    conversation: str,
    checkpoint: str,
    version: int,
    type_: str,
    data: dict[str, Any],
    recorded_at: datetime,
) -> FeedEvent:
    if type_ == "message_appended":
        with_kind(data["message"])  # the log leaves a role's default kind out
    return FeedEvent.model_construct(
        checkpoint=checkpoint,
        conversation_id=conversation,
        version=version,
        type=type_,
        recorded_at=recorded_at,
        data=data,
    )
