"""`ConvoClient`: the HTTP API, blocking (a script, a notebook, a sync framework).

    with ConvoClient("http://127.0.0.1:8000", api_key=key) as client:
        conversation = client.create_conversation("user-123")
        client.append_messages("user-123", [{"role": "user", "content": "hi"}])
        for message in client.iter_messages("user-123"):
            ...

The same methods as `AsyncConvoClient`, each running that client's method
on an event loop of the client's own, in a thread of its own
(store.client.blocking), and blocking until it is done: one implementation,
so the requests, retries, errors and idempotency keys are the same. It can
be used where an event loop already runs (a notebook). (The framework
adapters are async: they take the `AsyncConvoClient`.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from store.client.blocking_reads import BlockingReads
from store.client.wire import AgentState
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.conversation_keys import ConversationRef
from store.domain.listing import ConversationPage, ConversationQuery
from store.domain.messages import MAIN_AGENT, Content, Message, Role, StoredMessage
from store.domain.operations import BatchOperation
from store.domain.records import ExpectedVersion, StreamState
from store.domain.values import Appended, Batch, BatchResult, Conversation

ANY = StreamState.ANY


class ConvoClient(BlockingReads):
    """The convo-store HTTP API for one API key (so one tenant).

    `base_url`: where `convo serve` listens. `api_key`: a key from
    `convo keys create`. `retry`: how requests turned away for now are
    retried. `idempotency_keys`: give each append a fresh key (default)
    unless it names one. `http`: an `httpx.Client` to send with
    instead of the client's own (it then sends the key only if that one
    does; closing it is the caller's). `transport`: what the client's own
    sends through (e.g. `httpx.MockTransport`; a blocking one is sent
    through from worker threads). `sleep`: how it waits between tries
    (tests record the waits). Close it (`close()`, or use it in `with`)
    to close its connections and end its thread."""

    # --- conversations ---------------------------------------------------------------

    def create_conversation(
        self,
        conversation_id: ConversationRef | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        return self._portal.run(
            self._client.create_conversation(conversation_id=conversation_id, metadata=metadata)
        )

    def get_conversation(self, conversation_id: ConversationRef, /) -> Conversation:
        return self._portal.run(self._client.get_conversation(conversation_id))

    def list_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> ConversationPage:
        """A page of the tenant's conversations as `query` says (or its
        fields as keywords: metadata, archived, created_from, created_to,
        updated_from, updated_to, order, cursor, limit)."""
        return self._portal.run(self._client.list_conversations(query, **filters))

    def iter_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> Iterator[Conversation]:
        """Every conversation `list_conversations` would list, page after
        page (of `limit` each)."""
        return self._iterate(self._client.iter_conversations(query, **filters))

    def update_metadata(
        self,
        conversation_id: ConversationRef,
        /,
        patch: dict[str, Any],
        *,
        replace: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> Conversation:
        return self._portal.run(
            self._client.update_metadata(
                conversation_id, patch=patch, replace=replace, expected_version=expected_version
            )
        )

    def archive(self, conversation_id: ConversationRef, /) -> Conversation:
        return self._portal.run(self._client.archive(conversation_id))

    def unarchive(self, conversation_id: ConversationRef, /) -> Conversation:
        return self._portal.run(self._client.unarchive(conversation_id))

    def delete(self, conversation_id: ConversationRef, /) -> None:
        self._portal.run(self._client.delete(conversation_id))

    # --- messages and agents ------------------------------------------------------------

    def append_messages(
        self,
        conversation_id: ConversationRef,
        /,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
        idempotency_key: str | None = None,
    ) -> Appended:
        """Append messages, all or none; under `idempotency_key` (by default
        a new one), so a retry of a lost answer is not stored twice."""
        return self._portal.run(
            self._client.append_messages(
                conversation_id,
                messages=messages,
                expected_version=expected_version,
                idempotency_key=idempotency_key,
            )
        )

    def replace(
        self,
        conversation_id: ConversationRef,
        /,
        seq: int,
        content: Content,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return self._portal.run(
            self._client.replace(
                conversation_id, seq=seq, content=content, expected_version=expected_version
            )
        )

    def configure_agent(
        self,
        conversation_id: ConversationRef,
        /,
        profile: AgentProfile,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return self._portal.run(
            self._client.configure_agent(
                conversation_id, profile=profile, expected_version=expected_version
            )
        )

    def update_slot(
        self,
        conversation_id: ConversationRef,
        /,
        slot: str,
        value: str | Sequence[TodoItem] | None,
        *,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return self._portal.run(
            self._client.update_slot(
                conversation_id,
                slot=slot,
                value=value,
                agent_id=agent_id,
                expected_version=expected_version,
            )
        )

    def context_slots(
        self, conversation_id: ConversationRef, /, agent_id: str = MAIN_AGENT
    ) -> ContextSlots:
        return self._portal.run(self._client.context_slots(conversation_id, agent_id=agent_id))

    def agent_profile(
        self, conversation_id: ConversationRef, /, agent_id: str = MAIN_AGENT
    ) -> AgentProfile:
        return self._portal.run(self._client.agent_profile(conversation_id, agent_id=agent_id))

    def agent(self, conversation_id: ConversationRef, /, agent_id: str) -> AgentState:
        """The agent's profile and slots, in one request."""
        return self._portal.run(self._client.agent(conversation_id, agent_id=agent_id))

    # --- batches, forks, pins ------------------------------------------------------------

    def run_batch_operation(
        self,
        conversation_id: ConversationRef,
        /,
        operation: BatchOperation,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        """Any batch operation (start_batch, truncate, filter, clear, insert,
        rollback_to_batch) as the store's value (`store.domain.operations`)."""
        return self._portal.run(
            self._client.run_batch_operation(
                conversation_id, operation=operation, expected_version=expected_version
            )
        )

    def truncate(
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
    ) -> BatchResult:
        return self._portal.run(
            self._client.truncate(
                conversation_id,
                keep_first=keep_first,
                keep_last=keep_last,
                remove_first=remove_first,
                remove_last=remove_last,
                range_=range_,
                role=role,
                adjust=adjust,
                agent_id=agent_id,
                expected_version=expected_version,
            )
        )

    def clear(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        keep_system: bool = True,
        adjust: bool = False,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        return self._portal.run(
            self._client.clear(
                conversation_id,
                keep_system=keep_system,
                adjust=adjust,
                agent_id=agent_id,
                expected_version=expected_version,
            )
        )

    def batches(self, conversation_id: ConversationRef, /) -> list[Batch]:
        return self._portal.run(self._client.batches(conversation_id))

    def batch_messages(
        self, conversation_id: ConversationRef, /, batch: int
    ) -> list[StoredMessage]:
        return self._portal.run(self._client.batch_messages(conversation_id, batch=batch))

    def fork(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        new_conversation_id: ConversationRef | None = None,
        up_to_seq: int | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        return self._portal.run(
            self._client.fork(
                conversation_id,
                new_conversation_id=new_conversation_id,
                up_to_seq=up_to_seq,
                agent_id=agent_id,
                metadata=metadata,
            )
        )

    def pin_message(
        self,
        conversation_id: ConversationRef,
        /,
        seq: int,
        pinned: bool = True,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return self._portal.run(
            self._client.pin_message(
                conversation_id, seq=seq, pinned=pinned, expected_version=expected_version
            )
        )
