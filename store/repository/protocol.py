"""What a framework adapter needs of a repository, as a Protocol.

The adapters (store.adapters) are written against these methods only, so
they run on a local `Repository` (PostgreSQL or memory) or on the HTTP
client (`store.client.AsyncConvoClient`), which offers the same methods
with the same signatures and return types. A method added here must be
offered by both: `tests/client` holds both to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from store.domain.context import ContextSlots, TodoItem
from store.domain.conversation_keys import ConversationRef
from store.domain.feed import FeedEvent
from store.domain.listing import ConversationPage, ConversationQuery
from store.domain.messages import MAIN_AGENT, Message, Role, StoredMessage
from store.domain.records import ExpectedVersion, StreamState
from store.domain.values import Appended, BatchResult, Conversation, Scope, ToolBlock

ANY = StreamState.ANY


class ConversationRepository(Protocol):
    """The repository methods the framework adapters call."""

    async def create_conversation(
        self,
        conversation_id: ConversationRef | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation: ...

    async def get_conversation(self, conversation_id: ConversationRef, /) -> Conversation: ...

    async def list_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> ConversationPage: ...

    async def delete(self, conversation_id: ConversationRef, /) -> None: ...

    async def append_messages(
        self,
        conversation_id: ConversationRef,
        /,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
        idempotency_key: str | None = None,
    ) -> Appended: ...

    async def update_slot(
        self,
        conversation_id: ConversationRef,
        /,
        slot: str,
        value: str | Sequence[TodoItem] | None,
        *,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> int: ...

    async def context_slots(
        self, conversation_id: ConversationRef, /, agent_id: str = MAIN_AGENT
    ) -> ContextSlots: ...

    async def truncate(
        self,
        conversation_id: ConversationRef,
        /,
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
    ) -> BatchResult: ...

    async def clear(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        keep_system: bool = True,
        adjust: bool = False,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult: ...

    async def fork(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        new_conversation_id: ConversationRef | None = None,
        up_to_seq: int | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation: ...

    async def visible_window(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        batch: int | None = None,
        agent_id: str | None = None,
    ) -> list[StoredMessage]: ...

    async def read_messages(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
        role: Role | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        scope: Scope = "history",
    ) -> list[StoredMessage]: ...

    async def tool_blocks(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        pending_only: bool = False,
        agent_id: str | None = None,
    ) -> list[ToolBlock]: ...

    async def conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, limit: int = 100
    ) -> list[FeedEvent]: ...
