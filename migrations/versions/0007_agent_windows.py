"""A window per agent, pinned messages and forks.

- `conversations.agent_batches`: each agent whose window is in a batch of
  its own, {"agent": batch}; every other agent's window is in
  `current_batch`. Empty for every existing conversation: each agent keeps
  reading its messages of the current batch, exactly as before.
- `batches.agent_id`: whose window a batch is; NULL for every existing
  batch (each showed every agent's messages, and still does).
- `messages.pinned`: kept in the window by compaction; false for every
  existing message.

Each is a column with a constant default: no table is rewritten. Forks need
no schema: a fork's log holds its messages (docs/storage.md, "Forks").

Downgrading keeps the main agent's window current (a sub-agent's own batch
is then left behind: its messages read from the main agent's batch); the
`message_pinned` and `conversation_forked` events stay in the log, and the
older code cannot replay them (`convo rebuild`).

Create Date: 2026-11-23
"""

from __future__ import annotations

from migrations.steps import statement_steps

revision: str = "0007_agent_windows"
down_revision: str | None = "0006_search"

UPGRADE: list[str] = [
    "ALTER TABLE conversations ADD COLUMN agent_batches jsonb NOT NULL DEFAULT '{}'::jsonb",
    "ALTER TABLE batches ADD COLUMN agent_id text",
    "ALTER TABLE messages ADD COLUMN pinned boolean NOT NULL DEFAULT false",
]

DOWNGRADE: list[str] = [
    "UPDATE conversations SET current_batch = (agent_batches ->> 'main')::int"
    " WHERE agent_batches ? 'main'",
    "ALTER TABLE messages DROP COLUMN pinned",
    "ALTER TABLE batches DROP COLUMN agent_id",
    "ALTER TABLE conversations DROP COLUMN agent_batches",
]

upgrade, downgrade = statement_steps(UPGRADE, DOWNGRADE)
