"""What a tenant holds: its conversations and the bytes of their event log,
for the per-tenant caps (`api.quota`).

The bytes are the log's `data` as stored (`pg_column_size`: after
PostgreSQL's compression), summed per conversation by its primary key: a
scan of the tenant's events, so the caller asks seldom and remembers
(`api.quota` does, for a few seconds). The views are not counted: they are
rebuilt from the log and stay proportional to it.
"""

from __future__ import annotations

from store.postgres.pooled import Pooled

TENANT_USAGE = (
    "SELECT count(*) FILTER (WHERE c.deleted_at IS NULL), coalesce(sum(e.bytes), 0)"
    " FROM conversations AS c"
    " CROSS JOIN LATERAL (SELECT sum(pg_column_size(data)) AS bytes FROM events"
    "   WHERE conversation_id = c.id) AS e"
    " WHERE c.tenant = %(tenant)s"
)


class TenantUsage(Pooled):
    """The storage port's usage figures (`storage.PostgresStorage`)."""

    async def tenant_usage(self, tenant: str) -> tuple[int, int]:
        """(conversations not deleted, bytes of their log) of `tenant`."""
        ((conversations, stored),) = await self._rows(TENANT_USAGE, {"tenant": tenant})
        return int(conversations), int(stored)
