"""`ConversationState` on PostgreSQL: index look-ups inside the append
transaction, on a conversation whose stream row this transaction locked."""

from __future__ import annotations

import uuid
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store.commands import Head
from store.errors import ConversationNotFound
from store.messages import StoredMessage
from store.postgres.rows import WINDOW_COLUMNS, select_messages, stored_message, window_entry
from store.projections.tables import (
    batch_members,
    batches,
    conversation_heads,
    messages,
    tool_calls,
)
from store.validation import CallState
from store.window import WindowEntry


class PostgresState:
    def __init__(self, conn: AsyncConnection, conversation_id: uuid.UUID) -> None:
        self.conn = conn
        self.conversation_id = conversation_id
        self._head: Head | None = None

    async def head(self) -> Head:
        if self._head is None:
            row = (
                await self.conn.execute(
                    select(conversation_heads.c.next_seq, conversation_heads.c.current_batch).where(
                        conversation_heads.c.conversation_id == self.conversation_id
                    )
                )
            ).one_or_none()
            if row is None:
                raise ConversationNotFound(self.conversation_id)
            self._head = Head(next_seq=row.next_seq, current_batch=row.current_batch)
        return self._head

    async def calls(self, call_ids: set[str]) -> dict[str, CallState]:
        if not call_ids:
            return {}
        rows = await self.conn.execute(
            select(tool_calls.c.call_id, tool_calls.c.agent_id, tool_calls.c.status).where(
                tool_calls.c.conversation_id == self.conversation_id,
                tool_calls.c.call_id.in_(sorted(call_ids)),
            )
        )
        return {
            r.call_id: CallState(agent_id=r.agent_id, answered=r.status == "complete") for r in rows
        }

    async def pending_call_ids(self) -> set[str]:
        rows = await self.conn.execute(
            select(tool_calls.c.call_id).where(
                tool_calls.c.conversation_id == self.conversation_id,
                tool_calls.c.status == "pending",
            )
        )
        return {r.call_id for r in rows}

    async def window(self) -> list[WindowEntry]:
        window = await self.batch_window((await self.head()).current_batch)
        assert window is not None
        return window

    async def batch_window(self, batch: int) -> list[WindowEntry] | None:
        exists = (
            await self.conn.execute(
                select(batches.c.batch).where(
                    batches.c.conversation_id == self.conversation_id, batches.c.batch == batch
                )
            )
        ).one_or_none()
        if exists is None:
            return None
        rows = await self.conn.execute(
            select(*WINDOW_COLUMNS)
            .select_from(
                batch_members.join(
                    messages,
                    (messages.c.conversation_id == batch_members.c.conversation_id)
                    & (messages.c.seq == batch_members.c.seq),
                )
            )
            .where(
                batch_members.c.conversation_id == self.conversation_id,
                batch_members.c.batch == batch,
            )
            .order_by(batch_members.c.sort_key)
        )
        return [window_entry(r) for r in rows]

    async def key_after(self, key: Decimal) -> Decimal | None:
        value = (
            await self.conn.execute(
                select(func.min(messages.c.sort_key)).where(
                    messages.c.conversation_id == self.conversation_id, messages.c.sort_key > key
                )
            )
        ).scalar_one_or_none()
        return None if value is None else Decimal(value)

    async def key_before(self, key: Decimal) -> Decimal | None:
        value = (
            await self.conn.execute(
                select(func.max(messages.c.sort_key)).where(
                    messages.c.conversation_id == self.conversation_id, messages.c.sort_key < key
                )
            )
        ).scalar_one_or_none()
        return None if value is None else Decimal(value)

    async def message(self, seq: int) -> StoredMessage | None:
        row = (
            await self.conn.execute(
                select_messages().where(
                    messages.c.conversation_id == self.conversation_id, messages.c.seq == seq
                )
            )
        ).one_or_none()
        return None if row is None else stored_message(row)
