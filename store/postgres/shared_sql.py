"""What the storage's statements are built from: the conversation's row as
reads check it, a message as every read returns it, how a message's event
is joined or probed, and the two sources of a batch's members.

The statements themselves live beside the code that runs them (`sql`
lists where). They are hand-written SQL rather than SQLAlchemy Core: they
run on every append and read, psycopg prepares each at its first use, and
their exact shape matters for locking (`write_session.LOCK_STREAM`) and for
round trips (`append_sql.append_cte`). Placeholders are psycopg's
`%(name)s`.

A message's body is stored once, in its `message_appended` event; the
views hold columns and point at the event (`messages.event_version`) and at
its latest edit (`messages.edit_version`). `MESSAGE_COLUMNS` is how every
read gets a message back: its row, its body and, if edited, the new content.
"""

from __future__ import annotations

# --- the conversation's row ---------------------------------------------------------

# The main agent's current batch (what `Conversation.current_batch` reports):
# its own, once it has run a batch operation, else the conversation's first.
MAIN_BATCH = "coalesce((agent_batches ->> 'main')::int, current_batch)"

CONVERSATION_COLUMNS = (
    f"tenant, version, deleted_at IS NOT NULL, {MAIN_BATCH}, next_seq,"
    " archived_at IS NOT NULL, created_at, metadata, updated_at, key"
)
CONVERSATION = f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = %(cid)s"

# The check of CONVERSATION (`reads.check_readable`) as a condition, for a
# read that carries it in its own statement: its rows come back only when
# `tenant` may read the conversation. One probe of the primary key,
# evaluated once; an empty answer is told apart (missing, deleted, or just
# an empty page) by reading CONVERSATION after all.
READABLE = (
    "EXISTS (SELECT FROM conversations AS readable WHERE readable.id = %(cid)s"
    " AND readable.tenant = %(tenant)s AND readable.version <> 0"
    " AND readable.deleted_at IS NULL)"
)

# A keyset cursor's "no bound above": higher than any seq.
NO_SEQ_ABOVE = 2**62


def limit_of(param: str) -> str:
    """The LIMIT of a short read, as a value the planner cannot see into.

    With a plain parameter, a plan made for the call's value (say 50 rows)
    always looked cheaper than the reusable one (which assumes a tenth of
    the rows), so PostgreSQL planned every call anew, which cost more than
    the read (docs/storage.md, "Short reads"). As a subquery it is unknown
    to both, and from the sixth call on the prepared statement's plan is
    reused.
    """
    return f"LIMIT (SELECT %({param})s)"


# --- a message ------------------------------------------------------------------------


# The events' JSON comes back whole (`json` is returned as stored: no
# server-side rendering, which for `jsonb` was a large share of a whole
# window's read; docs/storage.md, "Tables"); the reader takes the message
# (or an edit's content) out of it.
#
# An edit's content is looked up only for an edited message: a CASE around a
# probe by key, not a join. Most messages are never edited, and as a join
# the planner hashed the conversation's events a second time for a whole
# window (docs/storage.md, "Whole-window reads"), or probed the key with a
# null for every row of a short read.
def edit_of(row: str) -> str:
    """The latest edit's content of the message whose edit `row` points at."""
    return (
        f"CASE WHEN {row}.edit_version IS NOT NULL THEN (SELECT ed.data FROM events AS ed"
        f" WHERE ed.conversation_id = {row}.conversation_id AND ed.version = {row}.edit_version)"
        " END"
    )


EDIT = edit_of("m")
MESSAGE_COLUMNS = (
    f"m.seq, m.batch, m.role_ordinal, m.token_estimate, e.recorded_at, e.data, {EDIT}, m.pinned"
)

# Each message's event, in one of two ways (docs/operations.md, "Statistics"):
# - joined as the planner sees fit, for the read of a whole history never
#   compacted (a whole window is hash-joined, faster than a probe per
#   message when the statistics know the conversation);
# - probed by key, one look-up a message, whatever the statistics say, for
#   every read that is bounded (a page, a role's range, a few messages by
#   seq or client id). A join planned from statistics that did not know the
#   conversation yet read its events once per message.
# Joined, a whole window hashes the events, bodies and all (the planner
# costs rows, not bytes, and there are as many events as messages). Tried
# and taken back: an always-true condition on the messages that the
# statistics cannot estimate, `(m.seq + 0) > 0`, so they look smaller and
# are hashed: faster for a window of thousands, but slower for a history of
# a hundred thousand, where the planner hashes the messages by itself, in
# parallel (docs/storage.md, "Whole-window reads", has the figures).
JOINED_EVENTS = (
    " JOIN events AS e ON e.conversation_id = m.conversation_id AND e.version = m.event_version"
)


def probe_events_of(row: str) -> str:
    """The event `row` points at, probed by key (`PROBE_EVENTS`)."""
    return (
        " JOIN LATERAL (SELECT e.position, e.recorded_at, e.data FROM events AS e"
        f" WHERE e.conversation_id = {row}.conversation_id AND e.version = {row}.event_version"
        " OFFSET 0) AS e ON true"
    )  # OFFSET 0: it stays a probe per message, not a join the planner may hash


PROBE_EVENTS = probe_events_of("m")

# --- a batch's members ------------------------------------------------------------------

# A batch's members come from two places (migration 0011; docs/storage.md,
# "Batch membership"): the messages that arrived in it, each a member by its
# own row, and those a batch operation carried over into it
# (`batch_carried`). A read of members is a branch per source, with the
# same conditions on `b` (the member: batch, sort key, seq) and `m` (its
# message). In the arrivals' branch `b` is the message's own row, which the
# planner flattens into `m`: `b.batch = …` and `ORDER BY b.sort_key` walk
# `ix_messages_batch`, with no second visit of `messages`. (The view
# `batch_members`, both sources in one, is for people's queries: no statement
# here reads it.)
ARRIVED = (
    "messages AS m CROSS JOIN LATERAL (SELECT m.conversation_id, m.batch, m.sort_key, m.seq) AS b"
)

# Carried members are a compacted window: read member by member, each
# message by its key, whatever the statistics say (a join planned for "one
# row" read the whole conversation once per member; docs/operations.md,
# "Statistics").
CARRIED = (
    "batch_carried AS b JOIN LATERAL (SELECT m.* FROM messages AS m"
    " WHERE m.conversation_id = b.conversation_id AND m.seq = b.seq OFFSET 0) AS m ON true"
)
MEMBER_SOURCES = (ARRIVED, CARRIED)

# A carried member as a payload build reads it: its own row holds its
# message's agent, event and latest edit (migration 0021) and, in the
# windows payload builds read, a copy of its event's body and position
# (migration 0022), so a compacted window is read from its members' rows
# alone. A member without the copy (an older batch, or one an older release
# wrote) has its event looked up by key, only then: a CASE evaluates the
# branch it takes. Each look-up was most of what a compacted window's read
# cost the server (docs/storage.md, "Batch membership").
CARRIED_BODIES = "batch_carried AS b"


def _copied_or_looked_up(copy: str, event_column: str) -> str:
    """A carried member's `copy` column, or its event's `event_column`."""
    return (
        f"CASE WHEN b.body IS NULL THEN (SELECT e.{event_column} FROM events AS e"
        " WHERE e.conversation_id = b.conversation_id AND e.version = b.event_version)"
        f" ELSE b.{copy} END"
    )


CARRIED_BODY = _copied_or_looked_up("body", "data")
CARRIED_BODY_POSITION = _copied_or_looked_up("body_position", "position")
CARRIED_EDIT = edit_of("b")
