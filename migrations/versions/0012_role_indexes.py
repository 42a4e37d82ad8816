"""The per-role look-ups ("the last 3 user messages", "assistant messages
2..5") go by one partial index per role on `messages`, instead of a
LIST-partitioned copy of three of its columns.

`message_role_index` held, for every message, its conversation, role,
ordinal and seq: columns `messages` already has (`role`, `role_ordinal`,
`seq`), a partition's heap, its maps and its primary key for every message,
and cost every append an insert into one more table. A unique index per
role, `uq_messages_role_<role>` on `messages (conversation_id, role_ordinal)
WHERE role = '<role>'`, answers the same look-ups, in the same order, in a
fraction of the space (docs/storage.md, "What went, and what it cost"), and a read
finds the message's row itself rather than a pointer to it (one probe a row
fewer).

The spec asks for one table per role. Each role keeps a relation of its own
name, `message_role_index_<role>`, as a view over its rows of `messages`
(with the batch the spec's table names), and `message_role_index` is all
four: people's queries read what they read before. The store's statements
read `messages` through the role's index (store/postgres/history_sql.py,
docs/storage.md "Tables").

Upgrading moves nothing out of the log: the rows dropped are copies of
`messages`' columns.

Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

from migrations.steps import execute_all, role_partitions

revision: str = "0012_role_indexes"
down_revision: str | None = "0011_members_carried"

ROLES = ("system", "user", "assistant", "tool")
COLUMNS = "conversation_id, role, role_ordinal AS ordinal, seq, batch"


def upgrade() -> None:
    for role in ROLES:
        op.execute(
            f"CREATE UNIQUE INDEX uq_messages_role_{role}"
            f" ON messages (conversation_id, role_ordinal) WHERE role = '{role}'"
        )
    op.execute("DROP TABLE message_role_index")  # and its partitions
    op.execute(f"CREATE VIEW message_role_index AS SELECT {COLUMNS} FROM messages")
    for role in ROLES:
        op.execute(
            f"CREATE VIEW message_role_index_{role} AS"
            f" SELECT {COLUMNS} FROM messages WHERE role = '{role}'"
        )


def downgrade() -> None:
    for role in ROLES:
        op.execute(f"DROP VIEW message_role_index_{role}")
    op.execute("DROP VIEW message_role_index")
    op.execute(
        "CREATE TABLE message_role_index ("
        " conversation_id uuid NOT NULL, role text NOT NULL,"
        " ordinal bigint NOT NULL, seq bigint NOT NULL,"
        " CONSTRAINT pk_message_role_index PRIMARY KEY (conversation_id, role, ordinal)"
        ") PARTITION BY LIST (role)"
    )
    execute_all(role_partitions(ROLES))
    op.execute(
        "INSERT INTO message_role_index (conversation_id, role, ordinal, seq)"
        " SELECT conversation_id, role, role_ordinal, seq FROM messages"
    )
    for role in ROLES:
        op.execute(f"DROP INDEX uq_messages_role_{role}")
