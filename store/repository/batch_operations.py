"""The repository's batch operations (docs/behaviours.md §4): each starts a
new batch — a new window over the conversation — as its operation says
(start a batch at a boundary, truncate, filter, clear, insert, roll back);
nothing is deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from store.domain import commands, operations
from store.domain import window as win
from store.domain.conversation_keys import addressed, current_key
from store.domain.errors import InvalidOperation
from store.domain.events import BatchStarted, DomainEvent, MessageAppended
from store.domain.messages import MAIN_AGENT, Message, Role
from store.domain.operations import BatchOperation, refusal
from store.domain.records import ExpectedVersion
from store.domain.validation import parse_message
from store.domain.values import BatchResult
from store.repository.port import StreamRow, WriteSession
from store.repository.write_path import ANY, WritePath, Written


class BatchOperations(WritePath):
    """Batch operations: a new window for an agent, as an operation says."""

    @addressed
    async def run_batch_operation(
        self,
        conversation_id: uuid.UUID,
        operation: BatchOperation,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        """Start a new batch as `operation` says; nothing is deleted."""

        async def decide(session: WriteSession, stream: StreamRow) -> list[DomainEvent]:
            return await commands.decide_batch_operation(session, operation, self.limits)

        async def answer(session: WriteSession, written: Written) -> BatchResult:
            recorded = written.recorded
            started = next(r.event for r in recorded if isinstance(r.event, BatchStarted))
            source = await session.batch_window(started.source_batch, started.agent_id) or []
            shown = win.apply_batch(
                source,
                win.BatchDefinition(boundary=started.boundary, retained=started.retained),
            )
            arrived = sum(
                isinstance(r.event, MessageAppended) and r.event.batch == started.batch
                for r in recorded
            )
            return BatchResult(
                conversation_id=current_key(),
                version=written.version,
                batch=started.batch,
                visible=len(shown) + arrived,
            )

        return await self._write(conversation_id, decide, answer, expected_version=expected_version)

    async def _operate(
        self,
        conversation_id: uuid.UUID,
        expected_version: ExpectedVersion,
        kind: type[BatchOperation],
        **fields: Any,
    ) -> BatchResult:
        """Run the operation of `kind` that `fields` describe (InvalidOperation
        if they describe none)."""
        try:
            operation = kind(**fields)
        except ValidationError as error:
            raise refusal(error) from None
        return await self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
        )

    @addressed
    async def start_batch(
        self,
        conversation_id: uuid.UUID,
        boundary_seq: int,
        *,
        summary: Message | None = None,
        retain: Sequence[int] = (),
        adjust: bool = False,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        return await self._operate(
            conversation_id,
            expected_version,
            operations.StartBatch,
            agent_id=agent_id,
            boundary_seq=boundary_seq,
            summary=summary,
            retain=tuple(retain),
            adjust=adjust,
        )

    @addressed
    async def truncate(
        self,
        conversation_id: uuid.UUID,
        *,
        keep_first: int | None = None,
        keep_last: int | None = None,
        remove_first: int | None = None,
        remove_last: int | None = None,
        range_: tuple[int, int] | None = None,
        role: Role | None = None,
        adjust: bool = False,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        return await self._operate(
            conversation_id,
            expected_version,
            operations.Truncate,
            agent_id=agent_id,
            keep_first=keep_first,
            keep_last=keep_last,
            remove_first=remove_first,
            remove_last=remove_last,
            range=range_,
            role=role,
            adjust=adjust,
        )

    @addressed
    async def filter(
        self,
        conversation_id: uuid.UUID,
        *,
        roles: Sequence[Role] | None = None,
        content_contains: Sequence[str] | None = None,
        content_excludes: Sequence[str] | None = None,
        adjust: bool = False,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        return await self._operate(
            conversation_id,
            expected_version,
            operations.Filter,
            agent_id=agent_id,
            roles=tuple(roles) if roles is not None else None,
            content_contains=tuple(content_contains) if content_contains else None,
            content_excludes=tuple(content_excludes) if content_excludes else None,
            adjust=adjust,
        )

    @addressed
    async def clear(
        self,
        conversation_id: uuid.UUID,
        *,
        keep_system: bool = True,
        adjust: bool = False,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        return await self._operate(
            conversation_id,
            expected_version,
            operations.Clear,
            agent_id=agent_id,
            keep_system=keep_system,
            adjust=adjust,
        )

    @addressed
    async def insert(
        self,
        conversation_id: uuid.UUID,
        position: int,
        messages: Sequence[Message | dict[str, Any]],
        *,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        """Insert `messages` at `position` of `agent_id`'s window; they are
        that agent's messages (one naming another agent is refused)."""
        parsed = tuple(parse_message(m, i) for i, m in enumerate(messages))
        if not parsed:
            raise InvalidOperation("insert needs at least one message")
        return await self._operate(
            conversation_id,
            expected_version,
            operations.Insert,
            agent_id=agent_id,
            position=position,
            messages=parsed,
        )

    @addressed
    async def rollback_to_batch(
        self,
        conversation_id: uuid.UUID,
        batch: int,
        *,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        """Show again what batch `batch` showed `agent_id` (one of its own
        batches, or of every agent's), in a new batch of that agent."""
        return await self._operate(
            conversation_id,
            expected_version,
            operations.RollbackToBatch,
            agent_id=agent_id,
            batch=batch,
        )
