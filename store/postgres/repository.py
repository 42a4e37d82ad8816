"""`Repository` on PostgreSQL: commands in one transaction each, reads by
index look-up.

Every write runs the same way: lock the conversation's stream row (see
`store.log`), check the expected version, let `store.commands` decide the
events against a `PostgresState`, append them, and apply the projections —
all in one transaction, so a reader never sees events without their views
or views without their events.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store import commands
from store.command_methods import CommandMethods, Decide
from store.commands import ConversationState
from store.context import AgentProfile, ContextSlots
from store.errors import ConversationNotFound, InvalidOperation
from store.events import (
    ConversationArchived,
    ConversationDeleted,
    ConversationStarted,
    DomainEvent,
    MessageAppended,
    from_recorded,
)
from store.idempotency import client_ids, replay_by_client_ids
from store.idempotency import request_hash as append_request_hash
from store.log import (
    check_expected,
    find_request,
    lock_stream,
    read_versions,
    remember_request,
    write_events,
)
from store.messages import Message, Role, StoredMessage
from store.postgres import reads
from store.postgres.state import PostgresState
from store.projections.apply import project, project_all
from store.projections.tables import PROJECTION_TABLES
from store.records import ExpectedVersion, RecordedEvent, StreamState
from store.repository import (
    Appended,
    Batch,
    BatchResult,
    Conversation,
    Scope,
    ToolBlock,
)
from store.schema import DEFAULT_TENANT, append_requests, conversations, events
from store.validation import parse_message

if TYPE_CHECKING:
    from store.assembler import Assembly

ANY = StreamState.ANY


class PostgresRepository(CommandMethods):
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        tenant: str = DEFAULT_TENANT,
        limits: commands.Limits | None = None,
    ) -> None:
        self.engine = engine
        self.tenant = tenant
        self.limits = limits or commands.Limits()

    # --- the write path ----------------------------------------------------

    async def _write(
        self,
        conn: AsyncConnection,
        conversation_id: uuid.UUID,
        decide: Decide,
        expected_version: ExpectedVersion,
    ) -> tuple[int, list[RecordedEvent], list[DomainEvent]]:
        current = await lock_stream(conn, conversation_id, tenant=self.tenant, create=False)
        if current is None:
            raise ConversationNotFound(conversation_id)
        check_expected(conversation_id, expected_version, current)
        domain_events = await decide(PostgresState(conn, conversation_id))
        new_events = [
            e.to_new_event(
                client_id=e.message.client_message_id if isinstance(e, MessageAppended) else None
            )
            for e in domain_events
        ]
        recorded = await write_events(conn, conversation_id, current, new_events)
        await project_all(conn, list(zip(recorded, domain_events, strict=True)))
        return current + len(recorded), recorded, domain_events

    async def _command(
        self, conversation_id: uuid.UUID, decide: Decide, expected_version: ExpectedVersion
    ) -> int:
        async with self.engine.begin() as conn:
            version, _, _ = await self._write(conn, conversation_id, decide, expected_version)
        return version

    async def _batch_command(
        self, conversation_id: uuid.UUID, decide: Decide, expected_version: ExpectedVersion
    ) -> BatchResult:
        async with self.engine.begin() as conn:
            version, _, _ = await self._write(conn, conversation_id, decide, expected_version)
            state = PostgresState(conn, conversation_id)
            head = await state.head()
            visible = len(await state.window())
        return BatchResult(
            conversation_id=conversation_id,
            version=version,
            batch=head.current_batch,
            visible=visible,
        )

    # --- conversations -----------------------------------------------------

    async def create_conversation(
        self, conversation_id: uuid.UUID | None = None, *, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        conversation_id = conversation_id or uuid.uuid4()
        started = ConversationStarted(tenant=self.tenant, metadata=metadata or {})
        async with self.engine.begin() as conn:
            current = await lock_stream(conn, conversation_id, tenant=self.tenant, create=True)
            check_expected(conversation_id, StreamState.NO_STREAM, current)
            recorded = await write_events(conn, conversation_id, 0, [started.to_new_event()])
            await project(conn, recorded[0], started)
            await conn.execute(
                update(conversations)
                .where(conversations.c.id == conversation_id)
                .values(metadata=metadata or {})
            )
        return await self.get_conversation(conversation_id)

    async def get_conversation(self, conversation_id: uuid.UUID) -> Conversation:
        async with self.engine.connect() as conn:
            return await reads.conversation(conn, conversation_id, self.tenant)

    async def archive(self, conversation_id: uuid.UUID) -> Conversation:
        async def decide(state: ConversationState) -> list[DomainEvent]:
            return [ConversationArchived()]

        async with self.engine.begin() as conn:
            await self._write(conn, conversation_id, decide, ANY)
            await conn.execute(
                update(conversations)
                .where(conversations.c.id == conversation_id)
                .values(archived_at=conversations.c.updated_at)
            )
        return await self.get_conversation(conversation_id)

    async def delete(self, conversation_id: uuid.UUID) -> None:
        """Purge the conversation: its events, requests and projection rows.

        One event without content remains, so feed readers learn of the
        deletion; the stream row stays as a tombstone so the id cannot be
        reused by mistake. This is what makes a GDPR erasure possible.
        """
        async with self.engine.begin() as conn:
            current = await lock_stream(conn, conversation_id, tenant=self.tenant, create=False)
            if current is None:
                raise ConversationNotFound(conversation_id)
            for table in PROJECTION_TABLES:
                await conn.execute(delete(table).where(table.c.conversation_id == conversation_id))
            await conn.execute(
                delete(append_requests).where(append_requests.c.conversation_id == conversation_id)
            )
            await conn.execute(delete(events).where(events.c.conversation_id == conversation_id))
            await write_events(
                conn, conversation_id, current, [ConversationDeleted().to_new_event()]
            )
            await conn.execute(
                update(conversations)
                .where(conversations.c.id == conversation_id)
                .values(deleted_at=conversations.c.updated_at, metadata={})
            )

    # --- writes --------------------------------------------------------------

    async def append_messages(
        self,
        conversation_id: uuid.UUID,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
        idempotency_key: str | None = None,
    ) -> Appended:
        parsed = [parse_message(m, i) for i, m in enumerate(messages)]
        request_hash = append_request_hash(parsed)

        async def decide(state: ConversationState) -> list[DomainEvent]:
            return await commands.append_messages(state, parsed, self.limits)

        async with self.engine.begin() as conn:
            current = await lock_stream(conn, conversation_id, tenant=self.tenant, create=False)
            if current is None:
                raise ConversationNotFound(conversation_id)
            replay = await self._find_replay(
                conn, conversation_id, parsed, idempotency_key, request_hash
            )
            if replay is not None:
                return Appended(
                    conversation_id=conversation_id,
                    version=current,
                    messages=tuple(replay),
                    replayed=True,
                )
            version, recorded, domain_events = await self._write(
                conn, conversation_id, decide, expected_version
            )
            if idempotency_key is not None:
                await remember_request(
                    conn, conversation_id, idempotency_key, request_hash, recorded
                )
            seqs = [e.seq for e in domain_events if isinstance(e, MessageAppended)]
            stored = await reads.messages_by_seq(conn, conversation_id, seqs)
        return Appended(conversation_id=conversation_id, version=version, messages=tuple(stored))

    async def _find_replay(
        self,
        conn: AsyncConnection,
        conversation_id: uuid.UUID,
        parsed: Sequence[Message],
        idempotency_key: str | None,
        request_hash: str,
    ) -> list[StoredMessage] | None:
        """The messages an earlier identical append stored, if this is a retry."""
        if idempotency_key is not None:
            versions = await find_request(conn, conversation_id, idempotency_key, request_hash)
            if versions is None:
                return None
            recorded = await read_versions(conn, conversation_id, *versions)
            seqs = [e.seq for e in map(from_recorded, recorded) if isinstance(e, MessageAppended)]
            return await reads.messages_by_seq(conn, conversation_id, seqs)
        ids = client_ids(parsed)
        if not ids:
            return None
        found = await reads.messages_by_client_id(conn, conversation_id, ids)
        return replay_by_client_ids(parsed, found)

    # --- reads ----------------------------------------------------------------

    async def visible_window(
        self, conversation_id: uuid.UUID, *, batch: int | None = None, agent_id: str | None = None
    ) -> list[StoredMessage]:
        async with self.engine.connect() as conn:
            head = await reads.conversation(conn, conversation_id, self.tenant)
            number = head.current_batch if batch is None else batch
            return await reads.window(conn, conversation_id, number, agent_id=agent_id)

    async def recent_by_role(
        self,
        conversation_id: uuid.UUID,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        if n < 0:
            raise InvalidOperation(f"recent_by_role needs n >= 0, got {n}")
        async with self.engine.connect() as conn:
            head = await reads.conversation(conn, conversation_id, self.tenant)
            if scope == "history":
                return await reads.recent_in_history(conn, conversation_id, role, n, agent_id)
            return await reads.recent_in_batch(
                conn, conversation_id, head.current_batch, role, n, agent_id
            )

    async def role_range(
        self, conversation_id: uuid.UUID, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        if first < 1 or last < first:
            raise InvalidOperation(f"role_range needs 1 <= first <= last, got {first}..{last}")
        async with self.engine.connect() as conn:
            await reads.conversation(conn, conversation_id, self.tenant)
            return await reads.role_range(conn, conversation_id, role, first, last)

    async def count_by_role(
        self, conversation_id: uuid.UUID, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        async with self.engine.connect() as conn:
            head = await reads.conversation(conn, conversation_id, self.tenant)
            if scope == "history":
                return await reads.count_in_history(conn, conversation_id)
            return await reads.count_in_batch(conn, conversation_id, head.current_batch)

    async def tool_blocks(
        self, conversation_id: uuid.UUID, *, pending_only: bool = False, agent_id: str | None = None
    ) -> list[ToolBlock]:
        async with self.engine.connect() as conn:
            await reads.conversation(conn, conversation_id, self.tenant)
            return await reads.tool_blocks(conn, conversation_id, pending_only, agent_id)

    async def batch_messages(self, conversation_id: uuid.UUID, batch: int) -> list[StoredMessage]:
        async with self.engine.connect() as conn:
            await reads.conversation(conn, conversation_id, self.tenant)
            return await reads.messages_of_batch(conn, conversation_id, batch)

    async def batches(self, conversation_id: uuid.UUID) -> list[Batch]:
        async with self.engine.connect() as conn:
            await reads.conversation(conn, conversation_id, self.tenant)
            return await reads.batches(conn, conversation_id)

    async def context_slots(
        self, conversation_id: uuid.UUID, agent_id: str = "main"
    ) -> ContextSlots:
        async with self.engine.connect() as conn:
            await reads.conversation(conn, conversation_id, self.tenant)
            return await reads.context_slots(conn, conversation_id, agent_id)

    async def agent_profile(
        self, conversation_id: uuid.UUID, agent_id: str = "main"
    ) -> AgentProfile:
        async with self.engine.connect() as conn:
            await reads.conversation(conn, conversation_id, self.tenant)
            return await reads.agent_profile(conn, conversation_id, agent_id)

    async def assemble(
        self,
        conversation_id: uuid.UUID,
        *,
        agent_id: str = "main",
        format: str = "openai-chat",
        options: Any = None,
    ) -> Assembly:
        """The payload of this agent's next LLM call, from its visible window
        and its context slots as they are now."""
        from store.assembler import assemble

        async with self.engine.connect() as conn:
            head = await reads.conversation(conn, conversation_id, self.tenant)
            window = await reads.window(
                conn, conversation_id, head.current_batch, agent_id=agent_id
            )
            profile = await reads.agent_profile(conn, conversation_id, agent_id)
            slots = await reads.context_slots(conn, conversation_id, agent_id)
        return assemble(
            [m.as_message() for m in window],
            profile=profile,
            slots=slots,
            format=format,
            options=options,
        )
