"""The agents' and analysts' async API: what every repository offers.

`store.postgres.PostgresRepository` implements it on PostgreSQL;
`store.testing.InMemoryRepository` implements it in memory for users' own
tests. One contract test class runs against both.

Conventions:
- Writes take `expected_version` (an int, or `StreamState.ANY`): a stale
  expectation raises `ConcurrencyConflict`, never a silent overwrite.
- Role ordinals are 1-based: `role_range(c, "assistant", 2, 5)` is the 2nd
  to the 5th assistant message, inclusive.
- `scope="visible"` reads the current batch's window; `scope="history"`
  reads every message ever appended.
- Batches are numbered from 1 (the conversation's first window).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from store.context import AgentProfile, ContextSlots, TodoItem
from store.messages import Content, Message, Role, StoredMessage
from store.records import ExpectedVersion, StreamState

if TYPE_CHECKING:
    from store.assembler import Assembly

Scope = Literal["visible", "history"]
ANY = StreamState.ANY


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Conversation(_Value):
    id: uuid.UUID
    tenant: str
    version: int
    current_batch: int
    next_seq: int
    archived: bool
    started_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


class Appended(_Value):
    """What an append stored: the messages as numbered, and the new version."""

    conversation_id: uuid.UUID
    version: int
    messages: tuple[StoredMessage, ...]
    replayed: bool = False  # an idempotent retry: nothing was written


class Batch(_Value):
    number: int
    boundary: Decimal
    summary_seq: int | None
    retained: tuple[int, ...]
    operation: str
    parameters: dict[str, Any]
    started_at: datetime


class BatchResult(_Value):
    """What a batch operation did: the new version and the new batch."""

    conversation_id: uuid.UUID
    version: int
    batch: int
    visible: int  # messages shown by the new batch right after it started


class ToolBlock(_Value):
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    agent_id: str
    assistant_seq: int
    result_seq: int | None
    status: Literal["pending", "complete"]
    is_error: bool


class Repository(Protocol):
    # --- conversations -------------------------------------------------
    async def create_conversation(
        self, conversation_id: uuid.UUID | None = None, *, metadata: dict[str, Any] | None = None
    ) -> Conversation: ...
    async def get_conversation(self, conversation_id: uuid.UUID) -> Conversation: ...
    async def archive(self, conversation_id: uuid.UUID) -> Conversation: ...
    async def delete(self, conversation_id: uuid.UUID) -> None: ...

    # --- writes ----------------------------------------------------------
    async def append_messages(
        self,
        conversation_id: uuid.UUID,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
        idempotency_key: str | None = None,
    ) -> Appended: ...
    async def replace(
        self,
        conversation_id: uuid.UUID,
        seq: int,
        content: Content,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int: ...
    async def configure_agent(
        self,
        conversation_id: uuid.UUID,
        profile: AgentProfile,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int: ...
    async def update_slot(
        self,
        conversation_id: uuid.UUID,
        slot: str,
        value: str | Sequence[TodoItem] | None,
        *,
        agent_id: str = "main",
        expected_version: ExpectedVersion = ANY,
    ) -> int: ...

    # --- batch operations (behaviours §4) -------------------------------
    async def start_batch(
        self,
        conversation_id: uuid.UUID,
        boundary_seq: int,
        *,
        summary: Message | None = None,
        retain: Sequence[int] = (),
        adjust: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult: ...
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
    ) -> BatchResult: ...
    async def filter(
        self,
        conversation_id: uuid.UUID,
        *,
        roles: Sequence[Role] | None = None,
        content_contains: Sequence[str] | None = None,
        content_excludes: Sequence[str] | None = None,
        adjust: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult: ...
    async def clear(
        self,
        conversation_id: uuid.UUID,
        *,
        keep_system: bool = True,
        adjust: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult: ...
    async def insert(
        self,
        conversation_id: uuid.UUID,
        position: int,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult: ...
    async def rollback_to_batch(
        self, conversation_id: uuid.UUID, batch: int, *, expected_version: ExpectedVersion = ANY
    ) -> BatchResult: ...

    # --- reads -----------------------------------------------------------
    async def visible_window(
        self, conversation_id: uuid.UUID, *, batch: int | None = None, agent_id: str | None = None
    ) -> list[StoredMessage]: ...
    async def recent_by_role(
        self,
        conversation_id: uuid.UUID,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]: ...
    async def role_range(
        self, conversation_id: uuid.UUID, role: Role, first: int, last: int
    ) -> list[StoredMessage]: ...
    async def count_by_role(
        self, conversation_id: uuid.UUID, *, scope: Scope = "visible"
    ) -> dict[Role, int]: ...
    async def tool_blocks(
        self, conversation_id: uuid.UUID, *, pending_only: bool = False, agent_id: str | None = None
    ) -> list[ToolBlock]: ...
    async def batch_messages(
        self, conversation_id: uuid.UUID, batch: int
    ) -> list[StoredMessage]: ...
    async def batches(self, conversation_id: uuid.UUID) -> list[Batch]: ...
    async def context_slots(
        self, conversation_id: uuid.UUID, agent_id: str = "main"
    ) -> ContextSlots: ...
    async def agent_profile(
        self, conversation_id: uuid.UUID, agent_id: str = "main"
    ) -> AgentProfile: ...
    async def assemble(
        self,
        conversation_id: uuid.UUID,
        *,
        agent_id: str = "main",
        format: str = "openai-chat",
        options: Any = None,
    ) -> Assembly: ...
