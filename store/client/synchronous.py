"""`ConvoClient`: the HTTP API, blocking (a script, a notebook, a sync framework).

    with ConvoClient("http://127.0.0.1:8000", api_key=key) as client:
        conversation = client.create_conversation("user-123")
        client.append_messages("user-123", [{"role": "user", "content": "hi"}])
        for message in client.iter_messages("user-123"):
            ...

The same methods as `AsyncConvoClient`, each sending the same `Call`
(store.client.calls) and blocking on it; the retries, errors and
idempotency keys are the same too. (The framework adapters are async:
they take the `AsyncConvoClient`.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from store.client import calls
from store.client.sync_reads import Reads
from store.client.wire import AgentState
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.conversation_keys import ConversationRef
from store.domain.errors import InvalidOperation
from store.domain.listing import ConversationPage, ConversationQuery, conversation_query
from store.domain.messages import MAIN_AGENT, Content, Message, Role, StoredMessage
from store.domain.operations import BatchOperation
from store.domain.records import ExpectedVersion, StreamState
from store.domain.values import Appended, Batch, BatchResult, Conversation

ANY = StreamState.ANY


class ConvoClient(Reads):
    """The convo-store HTTP API for one API key (so one tenant).

    `base_url`: where `convo serve` listens. `api_key`: a key from
    `convo keys create`. `retry`: how requests turned away for now are
    retried. `idempotency_keys`: give each append a fresh key (default)
    unless it names one. `http`: an `httpx.Client` to send with
    instead of the client's own (it then sends the key only if that one
    does; closing it is the caller's). `transport`: what the client's own
    sends through (e.g. `httpx.WSGITransport`, `httpx.MockTransport`).
    `sleep`: how it waits between tries (tests record the waits)."""

    # --- conversations ---------------------------------------------------------------

    def create_conversation(
        self,
        conversation_id: ConversationRef | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        return self.call(calls.create_conversation(conversation_id, metadata))

    def get_conversation(self, conversation_id: ConversationRef, /) -> Conversation:
        return self.call(calls.get_conversation(conversation_id))

    def list_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> ConversationPage:
        """A page of the tenant's conversations as `query` says (or its
        fields as keywords: metadata, archived, created_from, created_to,
        updated_from, updated_to, order, cursor, limit)."""
        return self.call(calls.list_conversations(_listing(query, filters)))

    def iter_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> Iterator[Conversation]:
        """Every conversation `list_conversations` would list, page after
        page (of `limit` each)."""
        search = _listing(query, filters)
        while True:
            page = self.list_conversations(search)
            yield from page.items
            if page.next_cursor is None:
                return
            search = dataclasses.replace(search, cursor=page.next_cursor)

    def update_metadata(
        self,
        conversation_id: ConversationRef,
        /,
        patch: dict[str, Any],
        *,
        replace: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> Conversation:
        return self.call(
            calls.update_metadata(
                conversation_id, patch, replace=replace, expected_version=expected_version
            )
        )

    def archive(self, conversation_id: ConversationRef, /) -> Conversation:
        return self.call(calls.set_archived(conversation_id, True))

    def unarchive(self, conversation_id: ConversationRef, /) -> Conversation:
        return self.call(calls.set_archived(conversation_id, False))

    def delete(self, conversation_id: ConversationRef, /) -> None:
        self.call(calls.delete(conversation_id))

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
        if idempotency_key is None and self.idempotency_keys:
            idempotency_key = calls.new_idempotency_key()
        return self.call(
            calls.append_messages(
                conversation_id,
                messages,
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
        return self.call(calls.replace(conversation_id, seq, content, expected_version))

    def configure_agent(
        self,
        conversation_id: ConversationRef,
        /,
        profile: AgentProfile,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return self.call(calls.configure_agent(conversation_id, profile, expected_version))

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
        return self.call(
            calls.update_slot(
                conversation_id, slot, value, agent_id=agent_id, expected_version=expected_version
            )
        )

    def context_slots(
        self, conversation_id: ConversationRef, /, agent_id: str = MAIN_AGENT
    ) -> ContextSlots:
        return (self.agent(conversation_id, agent_id)).slots

    def agent_profile(
        self, conversation_id: ConversationRef, /, agent_id: str = MAIN_AGENT
    ) -> AgentProfile:
        return (self.agent(conversation_id, agent_id)).profile

    def agent(self, conversation_id: ConversationRef, /, agent_id: str) -> AgentState:
        """The agent's profile and slots, in one request."""
        return self.call(calls.agent(conversation_id, agent_id))

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
        return self.call(calls.run_batch_operation(conversation_id, operation, expected_version))

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
        operation = calls.truncate_operation(
            agent_id=agent_id,
            keep_first=keep_first,
            keep_last=keep_last,
            remove_first=remove_first,
            remove_last=remove_last,
            range=range_,
            role=role,
            adjust=adjust,
        )
        return self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
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
        operation = calls.clear_operation(agent_id=agent_id, keep_system=keep_system, adjust=adjust)
        return self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
        )

    def batches(self, conversation_id: ConversationRef, /) -> list[Batch]:
        return self.call(calls.batches(conversation_id))

    def batch_messages(
        self, conversation_id: ConversationRef, /, batch: int
    ) -> list[StoredMessage]:
        return self.call(calls.batch_messages(conversation_id, batch))

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
        return self.call(
            calls.fork(
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
        return self.call(calls.pin_message(conversation_id, seq, pinned, expected_version))


def _listing(query: ConversationQuery | None, filters: dict[str, Any]) -> ConversationQuery:
    """The query, or one of the filters; not both (as `Repository.list_conversations`)."""
    if query is None:
        return conversation_query(**filters)
    if filters:
        raise InvalidOperation(f"a query, or filters, not both: {', '.join(sorted(filters))}")
    return query
