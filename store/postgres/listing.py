"""A tenant's conversations, a page at a time (`Storage.list_conversations`;
the filters and the cursor are `store.domain.listing`'s).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from psycopg.types.json import Jsonb

from store.domain.listing import ConversationCursor, ConversationQuery, Listed
from store.postgres.pooled import Pooled, json_text
from store.postgres.reads import conversation_from_row
from store.postgres.shared_sql import MAIN_BATCH

# `key` is the client's id (store.domain.conversation_keys); `id`, the stream's
# uuid, is the tie-breaker the cursor carries.
LIST_COLUMNS = (
    f"key, tenant, version, {MAIN_BATCH}, next_seq, archived_at IS NOT NULL,"
    " created_at, metadata, updated_at, id"
)


@cache
def page_statement(
    *,
    newest: bool,
    metadata: bool = False,
    archived: bool | None = None,
    created_from: bool = False,
    created_to: bool = False,
    updated_from: bool = False,
    updated_to: bool = False,
    after: bool = False,
) -> str:
    """A page of a tenant's conversations by (created_at, id), one shape per
    filter combination (a filter not named is not applied). The order and
    the cursor are one range of the index (tenant, created_at, id); metadata
    containment can use the GIN index (jsonb_path_ops); updated_at is
    filtered, not indexed (see `store.domain.listing`)."""
    conditions = ["tenant = %(tenant)s", "version > 0", "deleted_at IS NULL"]
    if metadata:
        conditions.append("metadata @> %(metadata)s")
    if archived is not None:
        conditions.append(f"archived_at IS {'NOT ' if archived else ''}NULL")
    bounds = (
        (created_from, "created_at >= %(created_from)s"),
        (created_to, "created_at < %(created_to)s"),
        (updated_from, "updated_at >= %(updated_from)s"),
        (updated_to, "updated_at < %(updated_to)s"),
    )
    conditions += [condition for given, condition in bounds if given]
    if after:
        conditions.append(
            f"(created_at, id) {'<' if newest else '>'} (%(after_at)s, %(after_id)s::uuid)"
        )
    direction = " DESC" if newest else ""
    return (
        f"SELECT {LIST_COLUMNS} FROM conversations AS c WHERE {' AND '.join(conditions)}"
        f" ORDER BY c.created_at{direction}, c.id{direction} LIMIT %(limit)s"
    )


class ConversationListing(Pooled):
    """The storage port's listing (`storage.PostgresStorage`)."""

    async def list_conversations(self, tenant: str, query: ConversationQuery) -> list[Listed]:
        statement = page_statement(
            newest=query.newest,
            metadata=query.metadata is not None,
            archived=query.archived,
            created_from=query.created_from is not None,
            created_to=query.created_to is not None,
            updated_from=query.updated_from is not None,
            updated_to=query.updated_to is not None,
            after=query.after is not None,
        )
        params: dict[str, Any] = {
            "tenant": tenant,
            "metadata": None if query.metadata is None else Jsonb(query.metadata, dumps=json_text),
            "created_from": query.created_from,
            "created_to": query.created_to,
            "updated_from": query.updated_from,
            "updated_to": query.updated_to,
            "after_at": None if query.after is None else query.after.created_at,
            "after_id": None if query.after is None else query.after.id,
            "limit": query.limit + 1,  # one more: is there a next page?
        }
        return [
            Listed(
                conversation=conversation_from_row(row),
                cursor=ConversationCursor(created_at=row[6], id=row[9]),
            )
            for row in await self._analyst_rows(statement, params)
        ]
