"""Rebuilding a conversation's views from its log (`convo rebuild`,
`store.repository.rebuild`): the conversations there are, their events
counted, and a rebuild session that replays one conversation's events
through the projector into its emptied views, under its row lock.

The replay writes the projection steps an append writes
(`write_statements.step_statements`), so a rebuild equals what inline
maintenance built (docs/storage.md, "What the projector keeps equal").
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection

from store.domain.errors import ConversationNotFound
from store.domain.events import from_data
from store.domain.projector import Changes, Recorded
from store.postgres.append_sql import HEAD_UPDATE
from store.postgres.pooled import Pooled, by_hand, errors_translated
from store.postgres.write_session import LOCK_STREAM
from store.postgres.write_statements import (
    DELETE_VIEWS,
    agent_batches,
    head_params,
    step_statements,
)

CONVERSATION_IDS = "SELECT id FROM conversations ORDER BY id"

COUNT_EVENTS = (
    "SELECT count(*) FROM events WHERE %(cid)s::uuid IS NULL OR conversation_id = %(cid)s"
)

# The views emptied (DELETE_VIEWS), the head goes back to a new
# conversation's before the replay.
RESET_HEAD = (
    "UPDATE conversations SET next_seq = 1, current_batch = 1, role_counts = '{0,0,0,0}',"
    " agent_batches = '{}', archived_at = NULL WHERE id = %(cid)s"
)

EVENTS_AFTER = (
    "SELECT version, recorded_at, type, data FROM events"
    " WHERE conversation_id = %(cid)s AND version > %(after)s ORDER BY version LIMIT %(limit)s"
)

# A rebuild replays what was written: the head moves, the time of the last
# write (`updated_at`) does not.
REBUILD_HEAD_UPDATE = HEAD_UPDATE.replace(", updated_at = now()", "")


class RebuildSession:
    """One conversation's replay, in the transaction that holds its row lock."""

    def __init__(self, conn: AsyncConnection[Any], cid: uuid.UUID, version: int) -> None:
        self.conn = conn
        self.conversation_id = cid
        self.version = version

    async def events(self, after_version: int, limit: int) -> list[Recorded]:
        cursor = await self.conn.execute(
            EVENTS_AFTER, {"cid": self.conversation_id, "after": after_version, "limit": limit}
        )
        return [
            Recorded(version=v, recorded_at=at, event=from_data(type_, data))
            for v, at, type_, data in await cursor.fetchall()
        ]

    async def apply(self, changes: Changes) -> None:
        cid = self.conversation_id
        for step in changes.steps:
            for statement, params in step_statements(cid, step):
                await self.conn.execute(statement, params)
        await self.conn.execute(REBUILD_HEAD_UPDATE, head_params(cid, self.version, changes.head))
        await self.conn.execute(*agent_batches(cid, changes.head))


class Rebuilding(Pooled):
    """The storage port's rebuild operations (`storage.PostgresStorage`)."""

    async def conversation_ids(self) -> list[uuid.UUID]:
        return [r[0] for r in await self._rows(CONVERSATION_IDS, {})]

    async def count_events(self, conversation_id: uuid.UUID | None = None) -> int:
        (row,) = await self._rows(COUNT_EVENTS, {"cid": conversation_id})
        return int(row[0])

    @asynccontextmanager
    async def rebuilding(self, conversation_id: uuid.UUID) -> AsyncIterator[RebuildSession]:
        with errors_translated(conversation_id):
            async with by_hand(self.pool) as conn:
                await conn.execute("BEGIN")
                cursor = await conn.execute(LOCK_STREAM, {"cid": conversation_id})
                row = await cursor.fetchone()
                if row is None:
                    raise ConversationNotFound(conversation_id)
                for statement in (*DELETE_VIEWS, RESET_HEAD):
                    await conn.execute(statement, {"cid": conversation_id})
                yield RebuildSession(conn, conversation_id, row[1])
                await conn.execute("COMMIT")
