"""A carried member of an agent's current window keeps a copy of its
message's body: `batch_carried` gains `body` and `body_position`, the
event's `data` and `position`.

A compacted window is mostly carried members. Since 0021 a payload build
read them from their own rows and looked up each one's event by key: two
hundred index look-ups for the bench's window, most of what the server
spent on it and slower than the hash join an uncompacted window's read is
(docs/storage.md, "Batch membership"). With the body beside the member the
window is read from its members' rows alone.

The copy is of an event, which never changes (an edit is an event of its
own, `edit_version`), so it cannot go stale. It is kept only for the
window a payload build reads: a batch operation copies the bodies of the
members it carries into the new batch and clears those of the batch the
window leaves, so the copies of a conversation are
bounded by its current windows, not by its history. A member without one
(a batch from before this revision, or written by an older release during a
deploy) is read as before, its event looked up by key.

Upgrading fills the copies of the members of every agent's current window;
downgrading drops the columns. Nothing is moved out of the log either way.

Create Date: 2026-11-28
"""

from __future__ import annotations

from migrations.steps import statement_steps

revision: str = "0022_carried_bodies"
down_revision: str | None = "0021_carried_point_at_events"

UPGRADE = [
    "ALTER TABLE batch_carried ADD COLUMN body json, ADD COLUMN body_position bigint",
    # An agent's window is in its own batch if it has one, else in the
    # conversation's current one (`window_sql`'s `_READABLE_BATCH_OF_AGENT`).
    "UPDATE batch_carried AS b SET body = e.data, body_position = e.position"
    " FROM conversations AS c, events AS e"
    " WHERE c.id = b.conversation_id"
    " AND b.batch = coalesce((c.agent_batches ->> b.agent_id)::int, c.current_batch)"
    " AND e.conversation_id = b.conversation_id AND e.version = b.event_version",
]
DOWNGRADE = ["ALTER TABLE batch_carried DROP COLUMN body, DROP COLUMN body_position"]

upgrade, downgrade = statement_steps(UPGRADE, DOWNGRADE)
