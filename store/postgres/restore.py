"""Putting a conversation back from cold storage (`Storage.restoring`,
store.repository.retention): one transaction makes its stream row anew,
inserts its events as they were recorded and replays them into its views.

The stream row a deletion left as a tombstone is taken over (its one
remaining event, the purge's, goes with it); a live conversation of that id
is refused. The events keep their versions, types, data (`json`: the text
as it was) and recording times; they get new feed positions, so a feed
reader sees them again, after the purge it saw when they left. The replay
is the rebuild's (`RebuildSession`), so the views equal what inline
maintenance built; the head and the times follow the events.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection

from store.domain.errors import ConversationExists
from store.postgres.append_sql import rows_json
from store.postgres.pooled import Pooled, by_hand, errors_translated
from store.postgres.rebuild import RESET_HEAD, RebuildSession
from store.postgres.write_session import CREATE_STREAM, LOCK_STREAM, PURGE
from store.postgres.write_statements import DELETE_VIEWS
from store.repository.port import RestoredEvent, check_restored_order

# A tombstone taken over: what the purge left goes, the row is live and empty again.
REVIVE = (
    *(s for s in PURGE if s.startswith("DELETE")),
    *DELETE_VIEWS,
    RESET_HEAD,
    "UPDATE conversations SET deleted_at = NULL, metadata = '{}', version = 0 WHERE id = %(cid)s",
)

INSERT_RESTORED = (
    "INSERT INTO events (conversation_id, version, type, data, recorded_at)"
    " SELECT %(cid)s, x.version, x.type, x.data, x.recorded_at"
    " FROM json_to_recordset(%(events)s::json)"
    " AS x(version bigint, type text, data json, recorded_at timestamptz)"
)

# The row's version and times follow the events put back.
RESTORED_HEAD = (
    "UPDATE conversations SET version = %(version)s, updated_at = %(last)s,"
    " created_at = CASE WHEN %(first)s::timestamptz IS NULL THEN created_at"
    " ELSE %(first)s::timestamptz END WHERE id = %(cid)s"
)


class PostgresRestoreSession(RebuildSession):
    """The restore's inserts, then the rebuild's replay, in one transaction."""

    def __init__(self, conn: AsyncConnection[Any], cid: uuid.UUID) -> None:
        super().__init__(conn, cid, 0)

    async def insert(self, events: Sequence[RestoredEvent]) -> None:
        check_restored_order(self.version, events)
        if not events:
            return
        rows = [
            {"version": e.version, "type": e.type, "data": e.data, "recorded_at": e.recorded_at}
            for e in events
        ]
        cid = self.conversation_id
        await self.conn.execute(INSERT_RESTORED, {"cid": cid, "events": rows_json(rows)})
        first = events[0].recorded_at if self.version == 0 else None
        self.version = events[-1].version
        await self.conn.execute(
            RESTORED_HEAD,
            {"cid": cid, "version": self.version, "first": first, "last": events[-1].recorded_at},
        )


class Restoring(Pooled):
    """The storage port's restore (`storage.PostgresStorage`)."""

    @asynccontextmanager
    async def restoring(
        self, conversation_id: uuid.UUID, tenant: str, key: str
    ) -> AsyncIterator[PostgresRestoreSession]:
        with errors_translated(conversation_id):
            async with by_hand(self.pool) as conn:
                await conn.execute("BEGIN")
                params = {"cid": conversation_id, "tenant": tenant, "key": key}
                await conn.execute(CREATE_STREAM, params)
                cursor = await conn.execute(LOCK_STREAM, params)
                row = await cursor.fetchone()
                assert row is not None  # created above, or there already
                _, version, deleted = row[:3]
                if not deleted and version > 0:
                    raise ConversationExists(key, version)
                if deleted:
                    for statement in REVIVE:
                        await conn.execute(statement, params)
                yield PostgresRestoreSession(conn, conversation_id)
                await conn.execute("COMMIT")
