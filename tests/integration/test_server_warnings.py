"""At startup the service says what in the server's settings will hurt it
(docs/operations.md, "Statistics"): here, autovacuum being off."""

from __future__ import annotations

from store.postgres import PostgresStorage
from store.postgres.storage import AUTOVACUUM_OFF


async def test_autovacuum_off_is_reported_and_on_is_not(storage: PostgresStorage) -> None:
    async with storage.pool.connection() as conn:
        cursor = await conn.execute("SHOW autovacuum")
        row = await cursor.fetchone()
    assert row is not None
    expected = [AUTOVACUUM_OFF] if row[0] == "off" else []

    assert await storage.server_warnings() == expected
