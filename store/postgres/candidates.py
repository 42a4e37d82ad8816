"""Conversations due for compaction, and the claims that keep two jobs off
one conversation (`store.compaction`; the port's `compaction_candidates`
and `try_claim`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from store.postgres.pooled import Pooled
from store.postgres.shared_sql import MEMBER_SOURCES
from store.repository.port import CandidateCursor, CandidateQuery, CompactionCandidate

# A window never holds more messages than this, read from the stream row and
# its current batch's row alone: every member of a batch is retained, or has
# a seq at or past the boundary (a sort key is never above its message's seq,
# and whatever arrives in the batch gets a seq past it). With a message
# threshold only, it rules most conversations out before any message is read.
_WINDOW_BOUND = "c.next_seq - floor(cb.boundary) + jsonb_array_length(cb.retained)"
_AGENT_BATCH = "coalesce((c.agent_batches ->> %(agent)s::text)::int, c.current_batch)"


def page_statement(*, max_messages: bool, max_tokens: bool, after: bool) -> str:
    """A page of a tenant's writable conversations whose agent's current window
    (its batch's members that are its messages) is over a threshold, by
    (created_at, id): the window's size is counted over those members
    (O(window), never the history), and only for conversations the head
    columns do not rule out."""
    conditions = [
        "c.tenant = %(tenant)s",
        "c.version > 0",
        "c.deleted_at IS NULL",
        "c.archived_at IS NULL",
    ]
    if after:
        conditions.append("(c.created_at, c.id) > (%(after_at)s, %(after_id)s::uuid)")
    if max_messages and not max_tokens:
        conditions.append(f"{_WINDOW_BOUND} > %(max_messages)s")
    over = []
    if max_messages:
        over.append("w.messages > %(max_messages)s")
    if max_tokens:
        over.append("w.tokens > %(max_tokens)s")
    conditions.append(f"({' OR '.join(over) or 'false'})")
    return (
        "SELECT c.key, c.version, c.created_at, c.id, w.messages, w.tokens"
        " FROM conversations AS c"
        f" JOIN batches AS cb ON cb.conversation_id = c.id AND cb.batch = {_AGENT_BATCH}"
        " CROSS JOIN LATERAL (SELECT count(*) AS messages,"
        " coalesce(sum(token_estimate), 0) AS tokens FROM ("
        + " UNION ALL ".join(
            f"SELECT m.token_estimate FROM {source} WHERE b.conversation_id = c.id"
            " AND b.batch = cb.batch AND m.agent_id = %(agent)s"
            for source in MEMBER_SOURCES
        )
        + ") AS members) AS w"
        f" WHERE {' AND '.join(conditions)}"
        " ORDER BY c.created_at, c.id LIMIT %(limit)s"
    )


# A claim every process using this database sees (`Storage.try_claim`): a
# session-level advisory lock on a 64-bit hash of the claim's name, never
# waited for. A hash collision only makes a claim look taken.
TRY_CLAIM = "SELECT pg_try_advisory_lock(hashtextextended(%(name)s, 0))"
RELEASE_CLAIM = "SELECT pg_advisory_unlock(hashtextextended(%(name)s, 0))"


class CompactionQueries(Pooled):
    """The storage port's compaction candidates and claims
    (`storage.PostgresStorage`)."""

    async def compaction_candidates(
        self, tenant: str, query: CandidateQuery
    ) -> list[CompactionCandidate]:
        statement = page_statement(
            max_messages=query.max_messages is not None,
            max_tokens=query.max_tokens is not None,
            after=query.after is not None,
        )
        params = {
            "tenant": tenant,
            "agent": query.agent_id,
            "max_messages": query.max_messages,
            "max_tokens": query.max_tokens,
            "after_at": None if query.after is None else query.after.created_at,
            "after_id": None if query.after is None else query.after.stream,
            "limit": query.limit,
        }
        return [
            CompactionCandidate(
                conversation_id=key,
                version=version,
                messages=int(messages),
                tokens=int(tokens),
                cursor=CandidateCursor(created_at=created_at, stream=stream),
            )
            for key, version, created_at, stream, messages, tokens in await self._rows(
                statement, params
            )
        ]

    @asynccontextmanager
    async def try_claim(self, name: str) -> AsyncIterator[bool]:
        """A session advisory lock held on a connection of its own, outside
        any transaction, for as long as the claim lasts (see
        store.compaction.job for why not a row lock)."""
        async with self._connection() as conn:
            cursor = await conn.execute(TRY_CLAIM, {"name": name})
            row = await cursor.fetchone()
            claimed = bool(row and row[0])
            try:
                yield claimed
            finally:
                if claimed:
                    try:
                        await conn.execute(RELEASE_CLAIM, {"name": name})
                    except BaseException:
                        # Never hand a connection still holding the lock back
                        # to the pool: closing it releases the lock.
                        await conn.close()
                        raise
