"""The storage port: the named operations a backend must provide.

`store.repository.Repository` is written once, over this port. A backend
is PostgreSQL (`store.postgres.PostgresStorage`: each operation a named
statement) or memory (`store.testing.MemoryStorage`: each operation a few
lines over dicts). Nothing above this port knows which one it runs on; the
contract suite in tests/contract runs against both.

A write happens inside `Storage.writing(...)`: a transaction that holds the
conversation's stream lock, so decisions made on what it reads stay true
until it commits. Lookups the write will need (the calls its tool messages
answer, its client ids, its idempotency key) are named up front, so a
backend can fetch them together with the lock (PostgreSQL: one round trip).
The write ends with `WriteSession.write(...)`: the events, the projection
changes `store.projections.projector` derived from them, and the request
to remember — all committed together or not at all.

Reads take the tenant and raise `ConversationNotFound` (also for another
tenant's conversation) or `ConversationDeleted`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from store.commands import ConversationState
from store.context import AgentProfile, ContextSlots
from store.messages import Message, Role, StoredMessage
from store.projections.projector import Changes, Recorded, ViewHead
from store.records import FeedPosition, RecordedEvent
from store.values import Batch, Conversation, ToolBlock


@dataclass(frozen=True, kw_only=True)
class StreamRow:
    """A conversation's stream row as a write finds it, locked."""

    tenant: str
    version: int
    deleted: bool
    archived: bool
    head: ViewHead
    now: datetime  # the transaction's time: when its events are recorded


@dataclass(frozen=True, kw_only=True)
class Lookups:
    """What a write will ask for, known before it takes the lock."""

    call_ids: frozenset[str] = frozenset()
    client_ids: tuple[str, ...] = ()
    idempotency_key: str | None = None


NO_LOOKUPS = Lookups()


@dataclass(frozen=True, kw_only=True)
class StoredRequest:
    """What an idempotency key wrote: the hash of the request, its events."""

    request_hash: str
    first_version: int
    last_version: int


@dataclass(frozen=True, kw_only=True)
class EventToWrite:
    version: int
    type: str
    data: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Write:
    """One write's effect: events, the views' changes, the request to remember."""

    events: tuple[EventToWrite, ...]
    changes: Changes
    request: tuple[str, StoredRequest] | None = None


class WriteSession(ConversationState, Protocol):
    """A transaction holding one conversation's stream lock.

    `stream` is None when the conversation does not exist (and the write
    did not ask to create it). As a `ConversationState` it answers the
    decisions in `store.commands`.
    """

    @property
    def stream(self) -> StreamRow | None: ...

    async def request(self, idempotency_key: str) -> StoredRequest | None: ...
    async def messages_by_client_id(
        self, client_ids: Sequence[str]
    ) -> dict[str, StoredMessage]: ...
    async def messages_written_by(
        self, first_version: int, last_version: int
    ) -> list[StoredMessage]:
        """The messages appended by the events in [first_version, last_version]."""
        ...

    async def write(self, write: Write) -> None: ...
    async def purge(self) -> None:
        """Delete the conversation's events, requests and views (the stream
        row stays, as a tombstone)."""
        ...


class RebuildSession(Protocol):
    """A transaction holding one conversation's stream lock, whose views
    were emptied: replay its events through the projector into them."""

    async def events(self, after_version: int, limit: int) -> list[Recorded]: ...
    async def apply(self, changes: Changes) -> None: ...


@dataclass(frozen=True, kw_only=True)
class AssemblyInput:
    """What a payload build reads, in one go: the agent's visible window,
    its profile and its context slots."""

    window: list[Message]
    profile: AgentProfile
    slots: ContextSlots


@dataclass(frozen=True, kw_only=True)
class HistoryPage:
    """A keyset page of a conversation's whole history, by seq."""

    after_seq: int | None = None
    before_seq: int | None = None
    limit: int = 100
    descending: bool = False


class Storage(Protocol):
    # --- writes ------------------------------------------------------------
    def writing(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        *,
        create: bool = False,
        lookups: Lookups = NO_LOOKUPS,
    ) -> AbstractAsyncContextManager[WriteSession]:
        """A write transaction on the conversation's locked stream row;
        with `create`, a missing conversation is created at version 0 for
        `tenant` first."""
        ...

    # --- reads ---------------------------------------------------------------
    async def conversation(self, conversation_id: uuid.UUID, tenant: str) -> Conversation: ...
    async def window(
        self, conversation_id: uuid.UUID, tenant: str, *, batch: int | None, agent_id: str | None
    ) -> list[StoredMessage]: ...
    async def recent_in_window(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]: ...
    async def recent_in_history(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]: ...
    async def role_range(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, first: int, last: int
    ) -> list[StoredMessage]: ...
    async def count_in_window(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]: ...
    async def count_in_history(
        self, conversation_id: uuid.UUID, tenant: str
    ) -> dict[Role, int]: ...
    async def history(
        self, conversation_id: uuid.UUID, tenant: str, page: HistoryPage
    ) -> list[StoredMessage]: ...
    async def tool_blocks(
        self, conversation_id: uuid.UUID, tenant: str, *, pending_only: bool, agent_id: str | None
    ) -> list[ToolBlock]: ...
    async def batch_messages(
        self, conversation_id: uuid.UUID, tenant: str, batch: int
    ) -> list[StoredMessage]: ...
    async def batches(self, conversation_id: uuid.UUID, tenant: str) -> list[Batch]: ...
    async def agent(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> tuple[AgentProfile, ContextSlots]: ...
    async def assembly_input(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> AssemblyInput: ...

    # --- the log -------------------------------------------------------------
    async def read_feed(self, after: FeedPosition, limit: int) -> list[RecordedEvent]: ...
    async def feed_head(self) -> FeedPosition: ...
    async def conversation_ids(self) -> list[uuid.UUID]: ...
    async def count_events(self, conversation_id: uuid.UUID | None = None) -> int: ...
    def rebuilding(
        self, conversation_id: uuid.UUID
    ) -> AbstractAsyncContextManager[RebuildSession]: ...
    async def ping(self) -> None:
        """Raise a `StorageFailure` unless the storage answers (readiness)."""
        ...

    async def feed_lag(self) -> float:
        """Seconds the global feed's horizon is behind now: the age of the
        oldest transaction still open (0 when none). Feed readers see nothing
        newer than it (see store.postgres.feed)."""
        ...

    async def close(self) -> None: ...
