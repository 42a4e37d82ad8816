"""The repository's reads: each an index range, O(what it returns).

- the visible window of a batch: `batch_members` (conversation, batch,
  sort_key) joined to `messages` by primary key;
- recent N of a role, visible: `ix_batch_members_role` read backwards;
- recent N of a role in the whole history, a range of a role's ordinals,
  counts: `message_role_index` (one partition per role) by primary key —
  a role's count is its highest ordinal, one backward index step.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, NoReturn

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store.context import AgentProfile, ContextSlots, default_profile, slots_from_values
from store.errors import ConversationDeleted, ConversationNotFound
from store.messages import ROLES, Role, StoredMessage
from store.postgres.rows import select_messages, stored_message
from store.projections.tables import (
    agent_profiles,
    batch_members,
    conversation_heads,
    message_role_index,
    messages,
    tool_calls,
)
from store.projections.tables import (
    batches as batches_table,
)
from store.projections.tables import (
    context_slots as slots_table,
)
from store.repository import Batch, Conversation, ToolBlock
from store.schema import conversations


async def conversation(
    conn: AsyncConnection, conversation_id: uuid.UUID, tenant: str
) -> Conversation:
    row = (
        await conn.execute(
            select(
                conversation_heads,
                conversations.c.version,
            )
            .join(conversations, conversations.c.id == conversation_heads.c.conversation_id)
            .where(
                conversation_heads.c.conversation_id == conversation_id,
                conversation_heads.c.tenant == tenant,
            )
        )
    ).one_or_none()
    if row is None:
        await _raise_missing(conn, conversation_id, tenant)
    return Conversation(
        id=conversation_id,
        tenant=row.tenant,
        version=row.version,
        current_batch=row.current_batch,
        next_seq=row.next_seq,
        archived=row.archived,
        started_at=row.started_at,
        metadata=row.metadata,
    )


async def _raise_missing(
    conn: AsyncConnection, conversation_id: uuid.UUID, tenant: str
) -> NoReturn:
    """A purged conversation says so; anything else (including another
    tenant's conversation) is simply not found."""
    deleted = (
        await conn.execute(
            select(conversations.c.deleted_at).where(
                conversations.c.id == conversation_id, conversations.c.tenant == tenant
            )
        )
    ).scalar_one_or_none()
    if deleted is not None:
        raise ConversationDeleted(conversation_id)
    raise ConversationNotFound(conversation_id)


def _join_members() -> Any:
    return batch_members.join(
        messages,
        (messages.c.conversation_id == batch_members.c.conversation_id)
        & (messages.c.seq == batch_members.c.seq),
    )


async def window(
    conn: AsyncConnection, conversation_id: uuid.UUID, batch: int, *, agent_id: str | None = None
) -> list[StoredMessage]:
    query = (
        select_messages()
        .select_from(_join_members())
        .where(batch_members.c.conversation_id == conversation_id, batch_members.c.batch == batch)
        .order_by(batch_members.c.sort_key)
    )
    if agent_id is not None:
        query = query.where(batch_members.c.agent_id == agent_id)
    return [stored_message(r) for r in await conn.execute(query)]


async def recent_in_batch(
    conn: AsyncConnection,
    conversation_id: uuid.UUID,
    batch: int,
    role: Role,
    n: int,
    agent_id: str | None,
) -> list[StoredMessage]:
    query = (
        select_messages()
        .add_columns(batch_members.c.sort_key.label("window_key"))
        .select_from(_join_members())
        .where(
            batch_members.c.conversation_id == conversation_id,
            batch_members.c.batch == batch,
            batch_members.c.role == role,
        )
        .order_by(batch_members.c.sort_key.desc())
        .limit(n)
    )
    if agent_id is not None:
        query = query.where(batch_members.c.agent_id == agent_id)
    rows = list(await conn.execute(query))
    return [stored_message(r) for r in reversed(rows)]


def _by_role_index(conversation_id: uuid.UUID, role: Role) -> Select[Any]:
    return (
        select_messages()
        .select_from(
            message_role_index.join(
                messages,
                (messages.c.conversation_id == message_role_index.c.conversation_id)
                & (messages.c.seq == message_role_index.c.seq),
            )
        )
        .where(
            message_role_index.c.conversation_id == conversation_id,
            message_role_index.c.role == role,
        )
    )


async def recent_in_history(
    conn: AsyncConnection, conversation_id: uuid.UUID, role: Role, n: int, agent_id: str | None
) -> list[StoredMessage]:
    query = (
        _by_role_index(conversation_id, role).order_by(message_role_index.c.ordinal.desc()).limit(n)
    )
    if agent_id is not None:
        query = query.where(message_role_index.c.agent_id == agent_id)
    rows = list(await conn.execute(query))
    return [stored_message(r) for r in reversed(rows)]


async def role_range(
    conn: AsyncConnection, conversation_id: uuid.UUID, role: Role, first: int, last: int
) -> list[StoredMessage]:
    query = (
        _by_role_index(conversation_id, role)
        .where(message_role_index.c.ordinal.between(first, last))
        .order_by(message_role_index.c.ordinal)
    )
    return [stored_message(r) for r in await conn.execute(query)]


async def count_in_history(conn: AsyncConnection, conversation_id: uuid.UUID) -> dict[Role, int]:
    # Ordinals are dense from 1, so a role's count is its highest ordinal:
    # one backward index step per role partition, all in one statement.
    highest = [
        select(func.max(message_role_index.c.ordinal))
        .where(
            message_role_index.c.conversation_id == conversation_id,
            message_role_index.c.role == role,
        )
        .scalar_subquery()
        .label(role)
        for role in ROLES
    ]
    row = (await conn.execute(select(*highest))).one()
    return {role: int(getattr(row, role) or 0) for role in ROLES}


async def count_in_batch(
    conn: AsyncConnection, conversation_id: uuid.UUID, batch: int
) -> dict[Role, int]:
    rows = await conn.execute(
        select(batch_members.c.role, func.count())
        .where(batch_members.c.conversation_id == conversation_id, batch_members.c.batch == batch)
        .group_by(batch_members.c.role)
    )
    found = {r[0]: int(r[1]) for r in rows}
    return {role: found.get(role, 0) for role in ROLES}


async def messages_by_seq(
    conn: AsyncConnection, conversation_id: uuid.UUID, seqs: Sequence[int]
) -> list[StoredMessage]:
    if not seqs:
        return []
    rows = await conn.execute(
        select_messages()
        .where(messages.c.conversation_id == conversation_id, messages.c.seq.in_(list(seqs)))
        .order_by(messages.c.seq)
    )
    return [stored_message(r) for r in rows]


async def messages_of_batch(
    conn: AsyncConnection, conversation_id: uuid.UUID, batch: int
) -> list[StoredMessage]:
    """The messages that arrived while batch `batch` was current."""
    rows = await conn.execute(
        select_messages()
        .where(messages.c.conversation_id == conversation_id, messages.c.batch == batch)
        .order_by(messages.c.seq)
    )
    return [stored_message(r) for r in rows]


async def messages_by_client_id(
    conn: AsyncConnection, conversation_id: uuid.UUID, client_ids: Sequence[str]
) -> dict[str, StoredMessage]:
    rows = await conn.execute(
        select_messages().where(
            messages.c.conversation_id == conversation_id,
            messages.c.client_message_id.in_(list(client_ids)),
        )
    )
    found = [stored_message(r) for r in rows]
    return {m.client_message_id: m for m in found if m.client_message_id is not None}


async def tool_blocks(
    conn: AsyncConnection, conversation_id: uuid.UUID, pending_only: bool, agent_id: str | None
) -> list[ToolBlock]:
    query = (
        select(tool_calls)
        .where(tool_calls.c.conversation_id == conversation_id)
        .order_by(tool_calls.c.assistant_seq, tool_calls.c.call_id)
    )
    if pending_only:
        query = query.where(tool_calls.c.status == "pending")
    if agent_id is not None:
        query = query.where(tool_calls.c.agent_id == agent_id)
    return [
        ToolBlock(
            call_id=r.call_id,
            tool_name=r.tool_name,
            arguments=r.arguments,
            agent_id=r.agent_id,
            assistant_seq=r.assistant_seq,
            result_seq=r.result_seq,
            status=r.status,
            is_error=r.is_error,
        )
        for r in await conn.execute(query)
    ]


async def batches(conn: AsyncConnection, conversation_id: uuid.UUID) -> list[Batch]:
    rows = await conn.execute(
        select(batches_table)
        .where(batches_table.c.conversation_id == conversation_id)
        .order_by(batches_table.c.batch)
    )
    return [
        Batch(
            number=r.batch,
            boundary=Decimal(r.boundary),
            summary_seq=r.summary_seq,
            retained=tuple(r.retained),
            operation=r.operation,
            parameters=r.parameters,
            started_at=r.started_at,
        )
        for r in rows
    ]


async def context_slots(
    conn: AsyncConnection, conversation_id: uuid.UUID, agent_id: str
) -> ContextSlots:
    rows = await conn.execute(
        select(slots_table.c.slot, slots_table.c.value).where(
            slots_table.c.conversation_id == conversation_id, slots_table.c.agent_id == agent_id
        )
    )
    return slots_from_values({r.slot: r.value for r in rows})


async def agent_profile(
    conn: AsyncConnection, conversation_id: uuid.UUID, agent_id: str
) -> AgentProfile:
    row = (
        await conn.execute(
            select(agent_profiles).where(
                agent_profiles.c.conversation_id == conversation_id,
                agent_profiles.c.agent_id == agent_id,
            )
        )
    ).one_or_none()
    if row is None:
        return default_profile(agent_id)
    return AgentProfile(
        agent_id=agent_id,
        is_sub_agent=row.is_sub_agent,
        system_prompt=row.system_prompt,
        role_definition=row.role_definition,
    )
