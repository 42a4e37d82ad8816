"""Text stored once: a message's body lives only in its event; the views keep
columns. Events are keyed by stream; the views' head moves into the stream row.

- `events`: primary key `(conversation_id, version)` (was: `position`, plus
  a unique `(conversation_id, version)`); `client_id` and `metadata` go
  (client ids are unique on `messages`; nothing wrote metadata); the foreign
  key to `conversations` goes (events are written under the stream row's
  lock and stream rows are never deleted; the check cost every append).
- `messages`: `body`, `text`, `tool_names`, `recorded_at`, `edited_at` go;
  `edit_version` points at the latest `message_edited` event. Reads join the
  events for the body (docs/storage.md).
- `message_role_index` loses `batch` and `agent_id`; `batch_members` loses
  `role`, `agent_id` and their index; `tool_calls` loses `arguments` (they
  stay in the assistant message's event); two analyst indexes on `messages`
  that nothing read go.
- only inserted messages' sort keys are indexed (an ordinary message's key
  is its seq); `conversations` is indexed by created time, not by the
  updated time every append changes, and keeps room for HOT updates.
- `events.data` becomes `json` (kept as given, returned as stored).
- `conversation_heads` becomes `conversations.next_seq` / `current_batch`, and
  each role's message count joins them (`role_counts`).

Existing data is kept: every dropped value is in the events already. The
space of dropped columns is reclaimed by the next table rewrite (`VACUUM
FULL`, or `pg_repack`), not by this migration.

Create Date: 2026-11-23
"""

from __future__ import annotations

from migrations.steps import statement_steps

revision: str = "0004_text_stored_once"
down_revision: str | None = "0003_api_keys"

UPGRADE = [
    # The views' head moves into the stream row.
    "ALTER TABLE conversations ADD COLUMN next_seq bigint NOT NULL DEFAULT 1,"
    " ADD COLUMN current_batch integer NOT NULL DEFAULT 1,"
    " ADD COLUMN role_counts bigint[] NOT NULL DEFAULT '{0,0,0,0}'::bigint[]",
    "UPDATE conversations AS c SET next_seq = h.next_seq, current_batch = h.current_batch"
    " FROM conversation_heads AS h WHERE h.conversation_id = c.id",
    "UPDATE conversations AS c SET role_counts = ARRAY["
    + ", ".join(
        "(SELECT coalesce(max(ordinal), 0) FROM message_role_index AS i"
        f" WHERE i.conversation_id = c.id AND i.role = '{role}')"
        for role in ("system", "user", "assistant", "tool")
    )
    + "]",
    "DROP TABLE conversation_heads",
    # Events keyed by stream.
    "ALTER TABLE events DROP CONSTRAINT uq_events_client_id",
    "ALTER TABLE events DROP COLUMN client_id, DROP COLUMN metadata",
    "ALTER TABLE events DROP CONSTRAINT pk_events",
    "ALTER TABLE events DROP CONSTRAINT uq_events_stream_version",
    "ALTER TABLE events DROP CONSTRAINT fk_events_conversation_id_conversations",
    "ALTER TABLE events ADD CONSTRAINT pk_events PRIMARY KEY (conversation_id, version)",
    # A message's body stays in its event; an edit's content in the edit's.
    "ALTER TABLE messages ADD COLUMN edit_version bigint",
    "UPDATE messages AS m SET edit_version = e.version FROM ("
    " SELECT conversation_id, (data ->> 'seq')::bigint AS seq, max(version) AS version"
    " FROM events WHERE type = 'message_edited' GROUP BY 1, 2"
    ") AS e WHERE e.conversation_id = m.conversation_id AND e.seq = m.seq",
    "DROP INDEX uq_messages_sort_key",
    "CREATE INDEX ix_messages_inserted_sort_key ON messages (conversation_id, sort_key)"
    " WHERE sort_key <> seq",
    "DROP INDEX ix_conversations_tenant_updated_at",
    "CREATE INDEX ix_conversations_tenant_created_at ON conversations (tenant, created_at)",
    "ALTER TABLE conversations SET (fillfactor = 50)",
    "DROP INDEX ix_messages_conversation_id_agent_id_seq",
    "DROP INDEX ix_messages_role_recorded_at",
    "ALTER TABLE messages DROP COLUMN body, DROP COLUMN text, DROP COLUMN tool_names,"
    " DROP COLUMN recorded_at, DROP COLUMN edited_at",
    "ALTER TABLE message_role_index DROP COLUMN batch, DROP COLUMN agent_id",
    "DROP INDEX ix_batch_members_role",
    "ALTER TABLE batch_members DROP COLUMN role, DROP COLUMN agent_id",
    "ALTER TABLE tool_calls DROP COLUMN arguments",
    # The log keeps JSON as text (see store.postgres.schema).
    "ALTER TABLE events ALTER COLUMN data TYPE json USING data::json",
]

# The body as the earlier schema kept it: the appended message with the
# latest edit's content.
_BODY = (
    "CASE WHEN ed.data IS NULL THEN e.data -> 'message'"
    " ELSE jsonb_set(e.data -> 'message', '{content}', ed.data -> 'content') END"
)

DOWNGRADE = [
    "ALTER TABLE events ALTER COLUMN data TYPE jsonb USING data::jsonb",
    "ALTER TABLE tool_calls ADD COLUMN arguments jsonb",
    "UPDATE tool_calls AS t SET arguments = coalesce(("
    " SELECT c -> 'arguments' FROM messages AS m"
    " JOIN events AS e ON e.conversation_id = m.conversation_id AND e.version = m.event_version,"
    " jsonb_array_elements(e.data -> 'message' -> 'tool_calls') AS c"
    " WHERE m.conversation_id = t.conversation_id AND m.seq = t.assistant_seq"
    " AND c ->> 'id' = t.call_id LIMIT 1), '{}'::jsonb)",
    "ALTER TABLE tool_calls ALTER COLUMN arguments SET NOT NULL",
    "ALTER TABLE batch_members ADD COLUMN role text, ADD COLUMN agent_id text",
    "UPDATE batch_members AS b SET role = m.role, agent_id = m.agent_id FROM messages AS m"
    " WHERE m.conversation_id = b.conversation_id AND m.seq = b.seq",
    "ALTER TABLE batch_members ALTER COLUMN role SET NOT NULL, ALTER COLUMN agent_id SET NOT NULL",
    "CREATE INDEX ix_batch_members_role ON batch_members (conversation_id, batch, role, sort_key)",
    "ALTER TABLE message_role_index ADD COLUMN batch integer, ADD COLUMN agent_id text",
    "UPDATE message_role_index AS i SET batch = m.batch, agent_id = m.agent_id"
    " FROM messages AS m WHERE m.conversation_id = i.conversation_id AND m.seq = i.seq",
    "ALTER TABLE message_role_index ALTER COLUMN batch SET NOT NULL,"
    " ALTER COLUMN agent_id SET NOT NULL",
    "ALTER TABLE messages ADD COLUMN body jsonb, ADD COLUMN text text,"
    " ADD COLUMN tool_names jsonb NOT NULL DEFAULT '[]'::jsonb,"
    " ADD COLUMN recorded_at timestamptz, ADD COLUMN edited_at timestamptz",
    f"UPDATE messages AS m SET body = {_BODY}, recorded_at = e.recorded_at,"
    " edited_at = ed.recorded_at"
    " FROM events AS e LEFT JOIN events AS ed ON false"
    " WHERE e.conversation_id = m.conversation_id AND e.version = m.event_version",
    f"UPDATE messages AS m SET body = {_BODY}, edited_at = ed.recorded_at"
    " FROM events AS e, events AS ed"
    " WHERE e.conversation_id = m.conversation_id AND e.version = m.event_version"
    " AND ed.conversation_id = m.conversation_id AND ed.version = m.edit_version",
    "UPDATE messages SET text = coalesce(CASE jsonb_typeof(body -> 'content')"
    " WHEN 'array' THEN (SELECT string_agg(p ->> 'text', E'\\n')"
    "  FROM jsonb_array_elements(body -> 'content') AS p WHERE p ->> 'type' = 'text')"
    " ELSE body ->> 'content' END, ''),"
    " tool_names = coalesce((SELECT jsonb_agg(c -> 'name')"
    "  FROM jsonb_array_elements(body -> 'tool_calls') AS c), '[]'::jsonb)",
    "ALTER TABLE messages ALTER COLUMN body SET NOT NULL, ALTER COLUMN text SET NOT NULL,"
    " ALTER COLUMN recorded_at SET NOT NULL, DROP COLUMN edit_version",
    "CREATE INDEX ix_messages_conversation_id_agent_id_seq ON messages"
    " (conversation_id, agent_id, seq)",
    "CREATE INDEX ix_messages_role_recorded_at ON messages (role, recorded_at)",
    "DROP INDEX ix_messages_inserted_sort_key",
    "CREATE UNIQUE INDEX uq_messages_sort_key ON messages (conversation_id, sort_key)",
    "DROP INDEX ix_conversations_tenant_created_at",
    "CREATE INDEX ix_conversations_tenant_updated_at ON conversations (tenant, updated_at)",
    "ALTER TABLE conversations RESET (fillfactor)",
    "ALTER TABLE events DROP CONSTRAINT pk_events",
    "ALTER TABLE events ADD CONSTRAINT pk_events PRIMARY KEY (position)",
    "ALTER TABLE events ADD CONSTRAINT uq_events_stream_version UNIQUE (conversation_id, version)",
    "ALTER TABLE events ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb,"
    " ADD COLUMN client_id text",
    "UPDATE events SET client_id = data -> 'message' ->> 'client_message_id'"
    " WHERE type = 'message_appended'",
    "ALTER TABLE events ADD CONSTRAINT uq_events_client_id UNIQUE (conversation_id, client_id)",
    "ALTER TABLE events ADD CONSTRAINT fk_events_conversation_id_conversations"
    " FOREIGN KEY (conversation_id) REFERENCES conversations (id)",
    "CREATE TABLE conversation_heads ("
    " conversation_id uuid NOT NULL, tenant text NOT NULL, next_seq bigint NOT NULL,"
    " current_batch integer NOT NULL, archived boolean NOT NULL DEFAULT false,"
    " started_at timestamptz NOT NULL, metadata jsonb NOT NULL DEFAULT '{}'::jsonb,"
    " CONSTRAINT pk_conversation_heads PRIMARY KEY (conversation_id))",
    "INSERT INTO conversation_heads"
    " SELECT id, tenant, next_seq, current_batch, archived_at IS NOT NULL, created_at, metadata"
    " FROM conversations WHERE version > 0 AND deleted_at IS NULL",
    "ALTER TABLE conversations DROP COLUMN next_seq, DROP COLUMN current_batch,"
    " DROP COLUMN role_counts",
]

upgrade, downgrade = statement_steps(UPGRADE, DOWNGRADE)
