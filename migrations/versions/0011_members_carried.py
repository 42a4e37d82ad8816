"""A batch's members are no longer written at every append: a message is a
member of the batch it arrived in by its own row (`messages.batch`,
`messages.sort_key`), and only the members a batch operation or a fork
carries into a new batch are rows of their own (`batch_carried`).

Until now `batch_members` held a row for every message in the batch it
arrived in, copying three columns of `messages` (a row and a primary-key
entry per message) and costing every append an insert into one more table.
An index on `messages (conversation_id, batch, sort_key)` walks the same
rows in the same order in less than half the space (docs/storage.md, "What
went, and what it cost").

`batch_members` stays, as a view (both kinds of member, the columns as
before), for people's queries; the store's statements name the two sources
themselves (store/postgres/shared_sql.py, docs/storage.md).

Upgrading moves nothing out of the log: the arrival rows that are deleted are
exactly the ones the messages' own rows now stand for.

Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision: str = "0011_members_carried"
down_revision: str | None = "0010_search_pending_list"

MEMBERS_VIEW = (
    "CREATE VIEW batch_members AS"
    " SELECT conversation_id, batch, sort_key, seq FROM batch_carried"
    " UNION ALL SELECT conversation_id, batch, sort_key, seq FROM messages"
)


def upgrade() -> None:
    op.execute("CREATE INDEX ix_messages_batch ON messages (conversation_id, batch, sort_key)")
    op.execute("ALTER TABLE batch_members RENAME TO batch_carried")
    op.execute("ALTER TABLE batch_carried RENAME CONSTRAINT pk_batch_members TO pk_batch_carried")
    # A message's membership of the batch it arrived in is its own row now.
    op.execute(
        "DELETE FROM batch_carried AS b USING messages AS m"
        " WHERE m.conversation_id = b.conversation_id AND m.seq = b.seq"
        " AND m.batch = b.batch AND m.sort_key = b.sort_key"
    )
    op.execute(MEMBERS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW batch_members")
    op.execute(
        "INSERT INTO batch_carried (conversation_id, batch, sort_key, seq)"
        " SELECT conversation_id, batch, sort_key, seq FROM messages"
    )
    op.execute("ALTER TABLE batch_carried RENAME CONSTRAINT pk_batch_carried TO pk_batch_members")
    op.execute("ALTER TABLE batch_carried RENAME TO batch_members")
    op.execute("DROP INDEX ix_messages_batch")
