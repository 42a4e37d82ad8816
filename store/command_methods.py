"""The repository's write operations that are the same on every storage.

Each builds a `decide` function from `store.commands` and hands it to the
storage's `_command` (returns the new version) or `_batch_command`
(returns the new batch). `PostgresRepository` and the in-memory fake
inherit these, so a batch operation's parameters are written once.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from store import commands
from store.commands import ConversationState
from store.context import AgentProfile, TodoItem
from store.errors import InvalidOperation
from store.events import DomainEvent
from store.messages import MAIN_AGENT, Content, Message, Role
from store.records import ExpectedVersion, StreamState
from store.repository import BatchResult
from store.validation import parse_message

Decide = Callable[[ConversationState], Awaitable[list[DomainEvent]]]
ANY = StreamState.ANY


class CommandMethods(ABC):
    limits: commands.Limits

    @abstractmethod
    async def _command(
        self, conversation_id: uuid.UUID, decide: Decide, expected_version: ExpectedVersion
    ) -> int:
        """Run `decide` on the locked conversation, append and project its
        events in one transaction; return the new version."""

    @abstractmethod
    async def _batch_command(
        self, conversation_id: uuid.UUID, decide: Decide, expected_version: ExpectedVersion
    ) -> BatchResult:
        """As `_command`, for an operation that starts a batch."""

    async def replace(
        self,
        conversation_id: uuid.UUID,
        seq: int,
        content: Content,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        async def decide(state: ConversationState) -> list[DomainEvent]:
            return await commands.replace_content(state, seq, content, self.limits)

        return await self._command(conversation_id, decide, expected_version)

    async def configure_agent(
        self,
        conversation_id: uuid.UUID,
        profile: AgentProfile,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        async def decide(state: ConversationState) -> list[DomainEvent]:
            return commands.configure_agent(profile)

        return await self._command(conversation_id, decide, expected_version)

    async def update_slot(
        self,
        conversation_id: uuid.UUID,
        slot: str,
        value: str | Sequence[TodoItem] | None,
        *,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        async def decide(state: ConversationState) -> list[DomainEvent]:
            return commands.update_slot(agent_id, slot, value)

        return await self._command(conversation_id, decide, expected_version)

    # --- batch operations ----------------------------------------------------------

    async def start_batch(
        self,
        conversation_id: uuid.UUID,
        boundary_seq: int,
        *,
        summary: Message | None = None,
        retain: Sequence[int] = (),
        adjust: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        async def decide(state: ConversationState) -> list[DomainEvent]:
            return await commands.start_batch(
                state, boundary_seq, self.limits, summary=summary, retain=retain, adjust=adjust
            )

        return await self._batch_command(conversation_id, decide, expected_version)

    async def _select(
        self,
        conversation_id: uuid.UUID,
        operation: str,
        parameters: dict[str, Any],
        adjust: bool,
        expected_version: ExpectedVersion,
    ) -> BatchResult:
        parameters = {k: v for k, v in parameters.items() if v is not None}

        async def decide(state: ConversationState) -> list[DomainEvent]:
            return await commands.select_batch(state, operation, parameters, adjust=adjust)

        return await self._batch_command(conversation_id, decide, expected_version)

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
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        parameters = {
            "keep_first": keep_first,
            "keep_last": keep_last,
            "remove_first": remove_first,
            "remove_last": remove_last,
            "range": list(range_) if range_ is not None else None,
            "role": role,
        }
        return await self._select(conversation_id, "truncate", parameters, adjust, expected_version)

    async def filter(
        self,
        conversation_id: uuid.UUID,
        *,
        roles: Sequence[Role] | None = None,
        content_contains: Sequence[str] | None = None,
        content_excludes: Sequence[str] | None = None,
        adjust: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        parameters = {
            "roles": list(roles) if roles is not None else None,
            "content_contains": list(content_contains) if content_contains else None,
            "content_excludes": list(content_excludes) if content_excludes else None,
        }
        return await self._select(conversation_id, "filter", parameters, adjust, expected_version)

    async def clear(
        self,
        conversation_id: uuid.UUID,
        *,
        keep_system: bool = True,
        adjust: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        return await self._select(
            conversation_id, "clear", {"keep_system": keep_system}, adjust, expected_version
        )

    async def insert(
        self,
        conversation_id: uuid.UUID,
        position: int,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        parsed = [parse_message(m, i) for i, m in enumerate(messages)]
        if not parsed:
            raise InvalidOperation("insert needs at least one message")

        async def decide(state: ConversationState) -> list[DomainEvent]:
            return await commands.insert_messages(state, position, parsed, self.limits)

        return await self._batch_command(conversation_id, decide, expected_version)

    async def rollback_to_batch(
        self, conversation_id: uuid.UUID, batch: int, *, expected_version: ExpectedVersion = ANY
    ) -> BatchResult:
        async def decide(state: ConversationState) -> list[DomainEvent]:
            return await commands.rollback_to_batch(state, batch)

        return await self._batch_command(conversation_id, decide, expected_version)
