"""Hand-written SQL of the event log, named and kept together.

Everything else is SQLAlchemy Core; these are the statements whose exact
shape matters for locking or for the feed's visibility rule (see
store.log's docstring before changing any of them).
"""

from __future__ import annotations

from sqlalchemy import text

# The stream row, not an event: DO NOTHING here only means "it exists".
CREATE_STREAM = text(
    "INSERT INTO conversations (id, tenant) VALUES (:id, :tenant) ON CONFLICT (id) DO NOTHING"
)

LOCK_STREAM = text(
    "SELECT version, tenant, deleted_at, archived_at FROM conversations WHERE id = :id FOR UPDATE"
)

STREAM_VERSION = text("SELECT version FROM conversations WHERE id = :id")

BUMP_STREAM_VERSION = text(
    "UPDATE conversations SET version = :version, updated_at = now() WHERE id = :id"
)

NOTIFY_FEED = text("SELECT pg_notify(:channel, :payload)")

# Only transactions below our snapshot's xmin are finished for certain.
_FEED_HORIZON = "(pg_snapshot_xmin(pg_current_snapshot())::text)::bigint"

READ_FEED = text(
    "SELECT position, conversation_id, version, type, data, metadata, client_id,"
    " recorded_at, transaction_id"
    " FROM events"
    " WHERE (transaction_id, position) > (:tx, :pos)"
    f" AND transaction_id < {_FEED_HORIZON}"
    " ORDER BY transaction_id, position"
    " LIMIT :limit"
)

FEED_HEAD = text(
    "SELECT coalesce(max(transaction_id), 0) AS transaction_id,"
    " coalesce(max(position), 0) AS position FROM ("
    "  SELECT transaction_id, position FROM events"
    f"  WHERE transaction_id < {_FEED_HORIZON}"
    "  ORDER BY transaction_id DESC, position DESC LIMIT 1"
    ") AS last_finished"
)
