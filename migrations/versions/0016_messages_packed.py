"""`messages` with its columns in alignment order, `role_ordinal` in 4 bytes.

PostgreSQL lays a row's columns out in their table order, each at the next
multiple of its alignment. `messages` had grown column by column: 8-byte
numbers after variable-length text, so most rows carried padding in three
places, and `role_ordinal` was a bigint beside the 4-byte `batch`. No
conversation can use the upper half of a role's ordinal: the store refuses
an append past 2,147,483,647 messages in one conversation (`store.domain.commands`),
and an ordinal never exceeds the message count. Fixed-width columns now come
first, widest first, then the variable-length ones, so a row carries no
padding between them (what the table saved: docs/storage.md, "What went,
and what it cost"). Its indexes keep their sizes (their keys are padded to
8 bytes either way).

PostgreSQL cannot reorder a table's columns in place, so the rows are copied
into a new table, which takes the old one's name, indexes, constraints and
the views over it (`message_role_index*`, `batch_members`), each read back
from the catalogue and created again as it was. Every value is kept. On a
large store run it in a maintenance window: it rewrites `messages` and its
indexes under an exclusive lock.

Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqlalchemy import text

revision: str = "0016_messages_packed"
down_revision: str | None = "0015_event_type_enum"

PACKED = (
    "conversation_id uuid NOT NULL",
    "seq bigint NOT NULL",
    "event_version bigint NOT NULL",
    "edit_version bigint",
    "batch integer NOT NULL",
    "role_ordinal integer NOT NULL",
    "token_estimate integer NOT NULL",
    "is_error boolean NOT NULL DEFAULT false",
    "pinned boolean NOT NULL DEFAULT false",
    "sort_key numeric NOT NULL",
    "role text NOT NULL",
    "agent_id text NOT NULL",
    "kind text NOT NULL",
    "tool_call_id text",
    "client_message_id text",
)
# As migrations 0002-0015 left it.
GROWN = (
    "conversation_id uuid NOT NULL",
    "seq bigint NOT NULL",
    "sort_key numeric NOT NULL",
    "role text NOT NULL",
    "agent_id text NOT NULL",
    "kind text NOT NULL",
    "batch integer NOT NULL",
    "role_ordinal bigint NOT NULL",
    "tool_call_id text",
    "is_error boolean NOT NULL DEFAULT false",
    "client_message_id text",
    "token_estimate integer NOT NULL",
    "event_version bigint NOT NULL",
    "edit_version bigint",
    "pinned boolean NOT NULL DEFAULT false",
)

VIEWS = (
    "SELECT DISTINCT v.relname, pg_get_viewdef(v.oid) FROM pg_depend AS d"
    " JOIN pg_rewrite AS r ON r.oid = d.objid JOIN pg_class AS v ON v.oid = r.ev_class"
    " WHERE d.refobjid = 'messages'::regclass AND v.oid <> 'messages'::regclass"
    " ORDER BY v.relname"
)
INDEXES = (
    "SELECT indexname, indexdef FROM pg_indexes"
    " WHERE schemaname = current_schema() AND tablename = 'messages' ORDER BY indexname"
)
# Not the NOT NULL ones PostgreSQL 18 catalogues too: the columns make those.
CONSTRAINTS = (
    "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint"
    " WHERE conrelid = 'messages'::regclass AND contype <> 'n' ORDER BY conname"
)


def _laid_out(columns: Sequence[str]) -> None:
    """`messages` again, its columns in `columns`' order and types."""
    bind = op.get_bind()
    views = bind.execute(text(VIEWS)).all()
    indexes = bind.execute(text(INDEXES)).all()
    constraints = bind.execute(text(CONSTRAINTS)).all()
    names = ", ".join(column.split()[0] for column in columns)
    op.execute(f"CREATE TABLE messages_laid_out ({', '.join(columns)})")
    op.execute(f"INSERT INTO messages_laid_out ({names}) SELECT {names} FROM messages")
    for view, _ in views:
        op.execute(f"DROP VIEW {view}")
    op.execute("DROP TABLE messages")
    op.execute("ALTER TABLE messages_laid_out RENAME TO messages")
    for _, definition in indexes:
        op.execute(definition)
    for name, kind, definition in constraints:
        if kind == "p":  # its index (with its storage options) is made above
            op.execute(f"ALTER TABLE messages ADD CONSTRAINT {name} PRIMARY KEY USING INDEX {name}")
        else:
            op.execute(f"ALTER TABLE messages ADD CONSTRAINT {name} {definition}")
    for view, definition in views:
        op.execute(f"CREATE VIEW {view} AS {definition}")
    op.execute("ANALYZE messages")


def upgrade() -> None:
    _laid_out(PACKED)


def downgrade() -> None:
    _laid_out(GROWN)
