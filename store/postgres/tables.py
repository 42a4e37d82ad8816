"""Projection tables: query-ready views of the log, on `store.postgres.schema.metadata`.

All of them can be dropped and rebuilt from the events (`store.repository.rebuild`).
Every value here comes from an event (never from `now()`), so a rebuild
equals what inline maintenance built, row for row.

- the head (next sequence number, current batch, each agent's own batch)
  is columns of `conversations`, beside the stream version they follow.
- `messages`: one row per message: real columns for what reads filter and
  order on; the body stays in the message's event.
- per role, the n-th message of that role → its row: a unique index of
  `messages` per role (`uq_messages_role_user`, …, on `(conversation_id,
  role_ordinal)`). "Last 3 user messages" and "assistant messages 2..5" are
  look-ups on it; "how many tool messages" is the stream row's
  `role_counts`. Each role's relation of its own name
  (`message_role_index_user`, …) is a view over these rows (migration 0012).
- `batches`: each visibility window's definition, and whose window it is.
- batch membership (which messages each batch shows, in window order): a
  message is a member of the batch it arrived in by its own row
  (`messages.batch`, `messages.sort_key`, walked in window order by
  `ix_messages_batch`), so an append writes no membership row; the members
  a batch operation or a fork carries into a new batch are rows of
  `batch_carried` (O(window), once). The view `batch_members` (migration
  0011) is both; a read of any batch, current or old, is two index ranges.
- `tool_calls`: one row per call: its tool block and whether it is answered.
- `agent_profiles`, `context_slots`: the latest value of each.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Index,
    Integer,
    Numeric,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSON, JSONB, UUID

from store.domain.messages import ROLES
from store.postgres.schema import metadata, optional, required

messages = Table(
    "messages",
    metadata,
    # Columns to find and order messages by; the body stays in its event
    # (`event_version`), and an edit's new content in the edit's event
    # (`edit_version`): text is stored once (docs/storage.md).
    # In alignment order, fixed widths first (migration 0016): no padding
    # between columns.
    required("conversation_id", UUID(as_uuid=True)),
    required("seq", BigInteger),
    required("event_version", BigInteger),
    optional("edit_version", BigInteger),
    required("batch", Integer),
    # 4 bytes, as `batch`: a conversation holds at most 2**31 - 1 messages
    # (`store.domain.commands`), so no role's ordinal needs more.
    required("role_ordinal", Integer),
    required("token_estimate", Integer),
    required("is_error", Boolean, server_default=text("false")),
    # Kept in the window by compaction (`message_pinned` events).
    required("pinned", Boolean, server_default=text("false")),
    required("sort_key", Numeric),
    required("role", Text),
    required("agent_id", Text),
    required("kind", Text),
    optional("tool_call_id", Text),
    optional("client_message_id", Text),
    PrimaryKeyConstraint("conversation_id", "seq", name="pk_messages"),
    CheckConstraint(
        "role IN ('system', 'user', 'assistant', 'tool')", name="ck_messages_role_known"
    ),
    # An ordinary message's sort key is its seq (found through the primary
    # key); only inserted messages, whose keys lie strictly between two
    # neighbours, are indexed by key: `insert` looks its neighbours up here.
    # Keys are unique by construction: they are chosen under the stream lock.
    Index(
        "ix_messages_inserted_sort_key",
        "conversation_id",
        "sort_key",
        postgresql_where=text("sort_key <> seq"),
    ),
    # Each batch's arrivals in window order (`batch_carried` holds the rest
    # of its members).
    Index("ix_messages_batch", "conversation_id", "batch", "sort_key"),
    # Per role, the n-th message of that role (migration 0012): "the last 3
    # user messages", "assistant messages 2..5".
    *(
        Index(
            f"uq_messages_role_{role}",
            "conversation_id",
            "role_ordinal",
            unique=True,
            postgresql_where=text(f"role = '{role}'"),
        )
        for role in ROLES
    ),
    Index(
        "uq_messages_client_message_id",
        "conversation_id",
        "client_message_id",
        unique=True,
        postgresql_where=text("client_message_id IS NOT NULL"),
    ),
)

batches = Table(
    "batches",
    metadata,
    required("conversation_id", UUID(as_uuid=True)),
    required("batch", Integer),
    required("boundary", Numeric),
    optional("summary_seq", BigInteger),
    required("retained", JSONB, server_default=text("'[]'::jsonb")),
    required("operation", Text),
    required("parameters", JSONB, server_default=text("'{}'::jsonb")),
    required("started_at", DateTime(timezone=True)),
    required("event_version", BigInteger),
    # The agent whose window the batch is; NULL: every agent's (the first
    # batch, and batches recorded before windows were per agent).
    optional("agent_id", Text),
    PrimaryKeyConstraint("conversation_id", "batch", name="pk_batches"),
)

# The members a batch did not receive by arrival: the tail and retained
# messages a batch operation carried over from the window it replaced.
batch_carried = Table(
    "batch_carried",
    metadata,
    required("conversation_id", UUID(as_uuid=True)),
    required("batch", Integer),
    required("sort_key", Numeric),
    required("seq", BigInteger),
    # What a payload build needs of the message, beside it (migration
    # 0021): whose it is, its event and its latest edit's, so a compacted
    # window's bodies are found from these rows alone, without a look-up of
    # each message's row. An edit updates `edit_version` here too.
    required("agent_id", Text),
    required("event_version", BigInteger),
    optional("edit_version", BigInteger),
    # A copy of the event's `data` and `position` (migration 0022), so a
    # payload build reads a compacted window from these rows alone, without
    # a look-up of each event. Events never change, so it cannot go stale;
    # it is kept for the members of the windows payload builds read (a
    # batch operation fills the new batch's and clears those of the batch
    # the window leaves), bounded by the windows, not the history. NULL:
    # the event is looked up.
    optional("body", JSON),
    optional("body_position", BigInteger),
    PrimaryKeyConstraint("conversation_id", "batch", "sort_key", name="pk_batch_carried"),
    # An edit finds the rows of the message it edits, in every batch.
    Index("ix_batch_carried_seq", "conversation_id", "seq"),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    required("conversation_id", UUID(as_uuid=True)),
    required("call_id", Text),
    required("agent_id", Text),
    required("tool_name", Text),
    # The arguments stay in the assistant message's event.
    required("assistant_seq", BigInteger),
    optional("result_seq", BigInteger),
    required("status", Text),
    required("is_error", Boolean, server_default=text("false")),
    PrimaryKeyConstraint("conversation_id", "call_id", name="pk_tool_calls"),
    CheckConstraint("status IN ('pending', 'complete')", name="ck_tool_calls_status_known"),
    # No index names `status`, `result_seq` or `is_error`, the columns a
    # call's completion sets: the update stays on its page, HOT, with no new
    # index entries (migration 0014). Pending calls are found by the primary
    # key's prefix: one conversation's calls.
    Index("ix_tool_calls_tool_name", "tool_name"),
)

agent_profiles = Table(
    "agent_profiles",
    metadata,
    required("conversation_id", UUID(as_uuid=True)),
    required("agent_id", Text),
    required("is_sub_agent", Boolean),
    optional("system_prompt", Text),
    optional("role_definition", Text),
    required("event_version", BigInteger),
    PrimaryKeyConstraint("conversation_id", "agent_id", name="pk_agent_profiles"),
)

context_slots = Table(
    "context_slots",
    metadata,
    required("conversation_id", UUID(as_uuid=True)),
    required("agent_id", Text),
    required("slot", Text),
    required("value", JSONB),
    required("event_version", BigInteger),
    PrimaryKeyConstraint("conversation_id", "agent_id", "slot", name="pk_context_slots"),
)

PROJECTION_TABLES = (
    messages,
    batches,
    batch_carried,
    tool_calls,
    agent_profiles,
    context_slots,
)


# Expression indexes over derived text (migration 0006, docs/search.md): not
# modelled (the substring one exists only where pg_trgm does), not compared.
SEARCH_INDEXES = frozenset({"ix_events_search_text", "ix_events_search_substring"})


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's `include_name` hook: compare everything but the search
    indexes. (Views, `batch_members` and the per-role ones, are not
    compared: alembic reads tables only.)"""
    return not (type_ == "index" and name in SEARCH_INDEXES)
