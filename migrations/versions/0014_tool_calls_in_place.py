"""A tool call's completion updates its row in place (a HOT update): no
index of `tool_calls` names a column the completion changes.

A call is inserted `pending` when its assistant message is appended and set
`complete` (`status`, `result_seq`, `is_error`) when its result arrives.
`ix_tool_calls_pending` was partial on `status = 'pending'`, so every
completion changed an indexed column: PostgreSQL then writes the row's new
version wherever it fits and a new entry for it in every index of the table
(the primary key and the tool-name index too), and the old entries stay
until a VACUUM: no completion was HOT. Without the partial index every one
is, and the table and its indexes are smaller (docs/storage.md, "What went,
and what it cost").

What the index served: "the calls of this conversation still pending", asked
by batch operations (which read the whole window anyway) and by the tool
blocks read with `pending=true`. Both now read the conversation's calls by
the primary key's prefix, `(conversation_id, …)`, and keep the pending ones:
a conversation's calls, not the table's.

Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision: str = "0014_tool_calls_in_place"
down_revision: str | None = "0013_append_only_indexes_full"


def upgrade() -> None:
    op.drop_index("ix_tool_calls_pending", table_name="tool_calls")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX ix_tool_calls_pending ON tool_calls (conversation_id, assistant_seq)"
        " WHERE status = 'pending'"
    )
