"""The event log's tables: conversation streams, events, idempotent appends.

Constraint names are chosen here, explicitly: `store.postgres.driver_errors`
maps a violation of a named constraint to our own error (e.g. `pk_events` →
`ConcurrencyConflict`), so a rename is a behaviour change and shows in
review. Projection tables live in `store.postgres.tables`, on the same
`metadata`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, ENUM, JSON, JSONB, UUID
from sqlalchemy.schema import SchemaItem

from store.domain.events import EVENT_TYPES

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def required(name: str, type_: Any, *more: SchemaItem, **options: Any) -> Column[Any]:
    """A NOT NULL column (every table here says which of its columns may be null)."""
    return Column(name, type_, *more, nullable=False, **options)


def optional(name: str, type_: Any, **options: Any) -> Column[Any]:
    """A column that may be NULL."""
    return Column(name, type_, nullable=True, **options)


DEFAULT_TENANT = "default"

conversations = Table(
    "conversations",
    metadata,
    required("id", UUID(as_uuid=True)),
    required("tenant", Text, server_default=text(f"'{DEFAULT_TENANT}'")),
    # The id its creator chose (`id` is derived from it and the tenant:
    # store.domain.conversation_keys); unique per tenant because `id` is.
    required("key", Text),
    # Number of events in the stream: the optimistic-concurrency token.
    required("version", BigInteger, server_default=text("0")),
    required("created_at", DateTime(timezone=True), server_default=text("now()")),
    required("updated_at", DateTime(timezone=True), server_default=text("now()")),
    optional("archived_at", DateTime(timezone=True)),
    # A deleted conversation keeps this row as a tombstone (so its id cannot
    # be reused by mistake); its events and projection rows are purged.
    optional("deleted_at", DateTime(timezone=True)),
    required("metadata", JSONB, server_default=text("'{}'::jsonb")),
    # The views' head, kept by the projector beside the stream it follows
    # (one row to lock and update per append); a rebuild resets and replays it.
    required("next_seq", BigInteger, server_default=text("1")),
    required("current_batch", Integer, server_default=text("1")),
    # Messages of each role so far, in `store.domain.messages.ROLES` order: the
    # next message's role ordinal, and "how many tool messages" in one read.
    required("role_counts", ARRAY(BigInteger), server_default=text("'{0,0,0,0}'::bigint[]")),
    # Each agent whose window is in a batch of its own: {"agent": batch}
    # (every other agent's is `current_batch`). Read with the lock, written
    # by a batch operation: an append never changes it (docs/storage.md).
    required("agent_batches", JSONB, server_default=text("'{}'::jsonb")),
    PrimaryKeyConstraint("id", name="pk_conversations"),
    CheckConstraint("version >= 0", name="ck_conversations_version_not_negative"),
    # Not on updated_at: every append updates it, and an indexed column would
    # make each of those updates a non-HOT one (a new index entry per append).
    # Listing: one range per page, ties by id (store.domain.listing, migration 0008).
    Index("ix_conversations_tenant_created_at_id", "tenant", "created_at", "id"),
    # Metadata containment (`@>`); appends never change metadata.
    Index(
        "ix_conversations_metadata",
        "metadata",
        postgresql_using="gin",
        postgresql_ops={"metadata": "jsonb_path_ops"},
    ),
    # Room on each page for the row's next version (HOT updates, pruned in place).
    postgresql_with={"fillfactor": "50"},
)

events = Table(
    "events",
    metadata,
    # Global position: from a sequence, so it has gaps and is NOT commit
    # order. Readers of the global feed order by (transaction_id, position);
    # see store.postgres.feed for why.
    required("position", BigInteger, Identity(always=True)),
    # No foreign key to `conversations`: every event is written under its
    # stream row's lock, and stream rows are never deleted (a deletion leaves
    # a tombstone), so the check could never fail — and it cost each append a
    # row-lock round inside the server (docs/storage.md, "What went").
    required("conversation_id", UUID(as_uuid=True)),
    required("version", BigInteger),
    # The event's type (`store.domain.events`), as an enum: 4 bytes, not its name
    # (migration 0015). Statements hand it as text; an assignment cast
    # converts it on insert.
    required("type", ENUM(*EVENT_TYPES, name="event_type", create_type=False)),
    # The event; a message's body is stored here (the views reference it:
    # docs/storage.md), and copied only beside the carried members of the
    # windows payload builds read (`batch_carried.body`, bounded by them).
    # `json`, not `jsonb`: the log keeps the compact JSON it was given
    # (validated, not re-encoded): smaller, and returned as stored, where
    # `jsonb` is rendered again at every read.
    required("data", JSON),
    required("recorded_at", DateTime(timezone=True), server_default=text("now()")),
    # The writing transaction's id (xid8, stored as bigint: 64-bit xids fit
    # for the next few hundred years and bigint compares and indexes plainly).
    required(
        "transaction_id",
        BigInteger,
        server_default=text("(pg_current_xact_id()::text)::bigint"),
    ),
    # The stream's key is the optimistic-concurrency backstop (a second
    # writer at the same version fails loudly) and every read's path to a
    # message body; `position` needs no index of its own: the feed's covers it.
    PrimaryKeyConstraint("conversation_id", "version", name="pk_events"),
    CheckConstraint("version >= 1", name="ck_events_version_positive"),
    Index("ix_events_feed", "transaction_id", "position"),
)

append_requests = Table(
    "append_requests",
    metadata,
    required("conversation_id", UUID(as_uuid=True)),
    required("idempotency_key", Text),
    # sha256 of the canonical JSON of the request's events: the same key
    # with different content is refused, not silently answered.
    required("request_hash", Text),
    required("first_version", BigInteger),
    required("last_version", BigInteger),
    required("recorded_at", DateTime(timezone=True), server_default=text("now()")),
    PrimaryKeyConstraint("conversation_id", "idempotency_key", name="pk_append_requests"),
)
