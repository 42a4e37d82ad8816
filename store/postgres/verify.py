"""Verifying a store end to end (`convo verify`), changing nothing.

What a backup that restored, or a store that survived a crash, must hold,
checked on the database itself, one `Problem` per thing found wrong:

- streams: each conversation's events are versions 1..n without a gap,
  and its row's `version` is n; its messages are seqs 1..m without a gap,
  and its `next_seq` is m + 1. A deleted conversation is a tombstone: its
  row and its one purge event, at the row's version, and no message (its
  views were purged with its log, so there is nothing to rebuild);
- projections: every view row equals what a rebuild from the log makes
  (the copies of events some rows keep, `COPIES`, equal their events).
  The rebuild (`rebuild.RebuildSession`, the replay `convo rebuild` runs)
  is done inside a transaction that is rolled back: the views are compared
  before and after it, and nothing is kept. It holds the conversation's
  row lock while it runs, so a writer of that conversation waits that long;
- feed order: in the global feed's order (transaction, position) each
  conversation's transactions come in version order (a later one holds
  only higher versions), and no two events share a feed position;
- search indexes: each one present is valid (a build that did not finish
  leaves an invalid one), and finds, for a sample of the words stored,
  exactly the events a scan of the table finds.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from store.domain.projector import ViewHead, project
from store.postgres.pooled import Pool, errors_translated
from store.postgres.rebuild import RESET_HEAD, RebuildSession
from store.postgres.search_indexes import INDEXES
from store.postgres.tables import PROJECTION_TABLES
from store.postgres.write_session import LOCK_STREAM
from store.postgres.write_statements import DELETE_VIEWS
from store.repository.rebuild import REPLAY_CHUNK

# The stream row's columns a rebuild sets (the rest are the stream's own).
PROJECTED_STREAM_COLUMNS = (
    "next_seq",
    "current_batch",
    "role_counts",
    "agent_batches",
    "archived_at",
    "metadata",
)
# Copies a view keeps of the log, not projected state: whether a row has one
# depends on the release that wrote it (`batch_carried.body`, migration 0022:
# an older release's batch operation writes none), so a rebuild is not
# compared on them. Each copy is compared with the event it copies instead.
COPIES = {"batch_carried": ("body", "body_position")}
COPIES_UNEQUAL = (
    "SELECT count(*) FROM batch_carried AS b JOIN events AS e"
    " ON e.conversation_id = b.conversation_id AND e.version = b.event_version"
    " WHERE b.conversation_id = %(cid)s AND b.body IS NOT NULL"
    " AND (b.body::text <> e.data::text OR b.body_position IS DISTINCT FROM e.position)"
)
# Words sampled from the stored text to probe each search index with.
SEARCH_PROBES = 20

STREAMS = (
    "SELECT c.id, c.tenant, c.key, c.version, c.next_seq,"
    " e.n, e.low, e.high, m.n, m.low, m.high, c.deleted_at IS NOT NULL"
    " FROM conversations AS c"
    " CROSS JOIN LATERAL (SELECT count(*), min(version), max(version) FROM events"
    "   WHERE conversation_id = c.id) AS e(n, low, high)"
    " CROSS JOIN LATERAL (SELECT count(*), min(seq), max(seq) FROM messages"
    "   WHERE conversation_id = c.id) AS m(n, low, high)"
    " ORDER BY c.tenant, c.key"
)
# A reader of the feed sees each transaction's events together, in the
# order of the transactions: so each later transaction of a conversation
# must hold only higher versions than every earlier one. (Within one
# transaction the rows may lie in another order: a fork writes its own
# events, then the copies of its parent's.)
FEED_OUT_OF_ORDER = (
    "SELECT c.tenant, c.key, count(*) FROM ("
    "  SELECT conversation_id, low,"
    "   max(high) OVER (PARTITION BY conversation_id ORDER BY transaction_id"
    "    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before"
    "  FROM (SELECT conversation_id, transaction_id, min(version) AS low,"
    "   max(version) AS high FROM events GROUP BY 1, 2) AS t) AS f"
    " JOIN conversations AS c ON c.id = f.conversation_id"
    " WHERE f.before >= f.low GROUP BY c.tenant, c.key"
)
FEED_SHARED_POSITIONS = (
    "SELECT count(*) FROM (SELECT transaction_id, position FROM events"
    " GROUP BY transaction_id, position HAVING count(*) > 1) AS shared"
)
INDEX_STATE = (
    "SELECT i.indisvalid AND i.indisready FROM pg_index AS i"
    " WHERE i.indexrelid = to_regclass(%(name)s)"
)
# From the latest content events (by the feed's index): what a crash or a
# restore would have lost last.
SAMPLE_WORDS = (
    "SELECT DISTINCT word FROM (SELECT (ts_parse('default', convo_search_text(data))).token"
    "  AS word FROM (SELECT data FROM events"
    "   WHERE type IN ('message_appended', 'message_edited')"
    "   ORDER BY transaction_id DESC, position DESC LIMIT 500) AS latest) AS words"
    " WHERE word ~ '^[[:alnum:]]{3,40}$' LIMIT %(limit)s"
)
TEXT_MATCHES = (
    "SELECT count(*) FROM events WHERE type IN ('message_appended', 'message_edited')"
    " AND to_tsvector('simple'::regconfig, convo_search_text(data))"
    " @@ plainto_tsquery('simple'::regconfig, %(word)s)"
)
# The same count, read by the index or by a scan of the table only.
BY_INDEX = ("SET LOCAL enable_seqscan = off", "SET LOCAL enable_indexscan = off")
BY_SCAN = ("SET LOCAL enable_bitmapscan = off", "SET LOCAL enable_indexscan = off")


@dataclass(frozen=True)
class Problem:
    """One thing found wrong: where (a conversation, as tenant/id), which check, what."""

    where: str
    check: str
    detail: str

    def __str__(self) -> str:
        return f"{self.where}: {self.check}: {self.detail}"


@dataclass
class Verified:
    """What was looked at, for the summary line."""

    conversations: int = 0
    events: int = 0
    search_probes: int = 0


Progress = Callable[[int], None]  # called after each conversation's projections


def _where(tenant: str, key: str) -> str:
    return f"{tenant}/{key}"


async def verify_store(
    pool: Pool, verified: Verified | None = None, progress: Progress | None = None
) -> AsyncIterator[Problem]:
    """Every problem found, check by check (see the module)."""
    tally = verified if verified is not None else Verified()
    with errors_translated():
        async with pool.connection() as conn:
            streams = await (await conn.execute(STREAMS)).fetchall()
            tally.conversations = len(streams)
            for problem in _stream_problems(streams, tally):
                yield problem
            async for problem in _feed_problems(conn):
                yield problem
            async for problem in _search_problems(conn, tally):
                yield problem
            for cid, tenant, key, *_, deleted in streams:
                if deleted:
                    continue  # a tombstone: checked with the streams
                async for problem in _projection_problems(conn, cid, _where(tenant, key)):
                    yield problem
                if progress is not None:
                    progress(1)


def _stream_problems(streams: list[tuple[Any, ...]], tally: Verified) -> list[Problem]:
    problems = []
    for row in streams:
        _, tenant, key, version, next_seq, events, low, high, messages, first, last, deleted = row
        where = _where(tenant, key)
        tally.events += events
        if deleted:
            if (events, low, messages) != (1, version, 0):
                problems.append(
                    Problem(
                        where,
                        "tombstone",
                        f"deleted at version {version}, yet {events} events"
                        f" (versions {low}..{high}) and {messages} messages remain",
                    )
                )
            continue
        if events and (low, high) != (1, events):
            problems.append(
                Problem(where, "versions", f"{events} events hold versions {low}..{high}")
            )
        if version != events:
            problems.append(
                Problem(where, "versions", f"the stream is at version {version}, {events} events")
            )
        if messages and (first, last) != (1, messages):
            problems.append(
                Problem(where, "seqs", f"{messages} messages hold seqs {first}..{last}")
            )
        if next_seq != messages + 1:
            problems.append(
                Problem(where, "seqs", f"next_seq is {next_seq} after {messages} messages")
            )
    return problems


async def _feed_problems(conn: AsyncConnection[Any]) -> AsyncIterator[Problem]:
    for tenant, key, count in await (await conn.execute(FEED_OUT_OF_ORDER)).fetchall():
        yield Problem(
            _where(tenant, key),
            "feed order",
            f"{count} transaction(s) come after one holding a higher version",
        )
    (shared,) = await (await conn.execute(FEED_SHARED_POSITIONS)).fetchone() or (0,)
    if shared:
        yield Problem("store", "feed order", f"{shared} feed positions are held by several events")


async def _search_problems(conn: AsyncConnection[Any], tally: Verified) -> AsyncIterator[Problem]:
    for kind, (name, _) in INDEXES.items():
        row = await (await conn.execute(INDEX_STATE, {"name": name})).fetchone()
        if row is None:
            continue  # not built: search reads the events (docs/search.md)
        if not row[0]:
            yield Problem("store", "search index", f"{name} ({kind}) is not valid: rebuild it")
            continue
        if kind != "text":
            continue
        rows = await (await conn.execute(SAMPLE_WORDS, {"limit": SEARCH_PROBES})).fetchall()
        for (word,) in rows:
            counts = []
            for planner in (BY_INDEX, BY_SCAN):
                async with conn.transaction():
                    for setting in planner:
                        await conn.execute(setting)
                    found = await (await conn.execute(TEXT_MATCHES, {"word": word})).fetchone()
                    counts.append(found[0] if found else 0)
            tally.search_probes += 1
            if counts[0] != counts[1]:
                yield Problem(
                    "store",
                    "search index",
                    f"{name} finds {counts[0]} events for {word!r}, the table {counts[1]}",
                )


async def _snapshot(conn: AsyncConnection[Any], cid: uuid.UUID) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for table in PROJECTION_TABLES:
        columns = ", ".join(c.name for c in table.c if c.name not in COPIES.get(table.name, ()))
        cursor = await conn.execute(
            f"SELECT {columns} FROM {table.name} WHERE conversation_id = %(cid)s", {"cid": cid}
        )
        rows[table.name] = sorted(repr(tuple(r)) for r in await cursor.fetchall())
    cursor = await conn.execute(
        f"SELECT {', '.join(PROJECTED_STREAM_COLUMNS)} FROM conversations WHERE id = %(cid)s",
        {"cid": cid},
    )
    rows["conversations"] = [repr(tuple(r)) for r in await cursor.fetchall()]
    return rows


async def _projection_problems(
    conn: AsyncConnection[Any], cid: uuid.UUID, where: str
) -> AsyncIterator[Problem]:
    """The views as they are against a rebuild of them, in a transaction
    rolled back whatever happens."""
    differences: list[Problem] = []
    async with conn.transaction(force_rollback=True):
        locked = await (await conn.execute(LOCK_STREAM, {"cid": cid})).fetchone()
        if locked is None:
            return  # deleted meanwhile
        kept = await _snapshot(conn, cid)
        for statement in (*DELETE_VIEWS, RESET_HEAD):
            await conn.execute(statement, {"cid": cid})
        session = RebuildSession(conn, cid, locked[1])
        after, head = 0, ViewHead()
        while chunk := await session.events(after, REPLAY_CHUNK):
            changes = project(head, chunk)
            await session.apply(changes)
            head, after = changes.head, chunk[-1].version
        rebuilt = await _snapshot(conn, cid)
        for table, rows in kept.items():
            if rows != rebuilt[table]:
                missing = len(set(rebuilt[table]) - set(rows))
                extra = len(set(rows) - set(rebuilt[table]))
                differences.append(
                    Problem(
                        where,
                        "projections",
                        f"{table} differs from a rebuild of the log"
                        f" ({missing} rows missing or changed, {extra} not from the log)",
                    )
                )
    (unequal,) = await (await conn.execute(COPIES_UNEQUAL, {"cid": cid})).fetchone() or (0,)
    if unequal:
        differences.append(
            Problem(where, "projections", f"{unequal} carried bodies differ from their events")
        )
    for problem in differences:
        yield problem
