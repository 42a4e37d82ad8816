"""`AsyncConvoClient`: the HTTP API from asyncio, with the repository's methods.

    async with AsyncConvoClient("http://127.0.0.1:8000", api_key=key) as client:
        conversation = await client.create_conversation("user-123")
        await client.append_messages("user-123", [{"role": "user", "content": "hi"}])
        async for message in client.iter_messages("user-123"):
            ...

The methods a framework adapter calls (`store.repository.protocol`) have
the `Repository`'s signatures and return types, so every adapter runs
over the service by passing a client where it took a repository. Errors
are the library's (store.client.problems); a busy conversation or an
unavailable database is retried as `retry` says (store.client.retrying);
each append carries an idempotency key of its own, reused by its retries.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec

from store.client import calls
from store.client.async_reads import AsyncReads
from store.client.derived import forwarding
from store.client.wire import AgentState, operation_of
from store.domain.context import AgentProfile, ContextSlots
from store.domain.conversation_keys import ConversationRef
from store.domain.errors import InvalidOperation
from store.domain.listing import ConversationPage, ConversationQuery, conversation_query
from store.domain.messages import MAIN_AGENT, Content, Message, StoredMessage
from store.domain.operations import BatchOperation, Clear, Truncate
from store.domain.records import ExpectedVersion, StreamState
from store.domain.values import Appended, Batch, BatchResult, Conversation
from store.repository import Repository
from store.repository.protocol import ConversationRepository

ANY = StreamState.ANY
P = ParamSpec("P")


def operating(
    kind: type[BatchOperation],
    like: Callable[Concatenate[Any, ConversationRef, P], Awaitable[BatchResult]],
) -> Callable[Concatenate[AsyncConvoClient, ConversationRef, P], Coroutine[Any, Any, BatchResult]]:
    """A batch operation as a method with the repository's signature (typed
    from the adapters' protocol, so the two cannot drift): its keywords are
    the operation's fields, sent by `run_batch_operation`."""

    @functools.wraps(like)
    async def send(
        self: AsyncConvoClient,
        conversation_id: ConversationRef,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> BatchResult:
        if args:
            raise TypeError(f"{like.__name__} takes its fields by keyword")
        fields: dict[str, Any] = dict(kwargs)
        expected_version: ExpectedVersion = fields.pop("expected_version", ANY)
        if "range_" in fields:  # `range` is a builtin in Python, a field on the wire
            fields["range"] = fields.pop("range_")
        return await self.run_batch_operation(
            conversation_id, operation_of(kind, **fields), expected_version=expected_version
        )

    return send


class AsyncConvoClient(AsyncReads):
    """The convo-store HTTP API for one API key (so one tenant).

    `base_url`: where `convo serve` listens. `api_key`: a key from
    `convo keys create`. `retry`: how requests turned away for now are
    retried. `idempotency_keys`: give each append a fresh key (default)
    unless it names one. `http`: an `httpx.AsyncClient` to send with
    instead of the client's own (it then sends the key only if that one
    does; closing it is the caller's). `transport`: what the client's own
    sends through (e.g. `httpx.ASGITransport(app)` for an app in process).
    `sleep`: how it waits between tries (tests record the waits)."""

    # --- conversations ---------------------------------------------------------------

    async def create_conversation(
        self,
        conversation_id: ConversationRef | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        return await self.call(calls.create_conversation(conversation_id, metadata))

    async def get_conversation(self, conversation_id: ConversationRef, /) -> Conversation:
        return await self.call(calls.get_conversation(conversation_id))

    async def list_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> ConversationPage:
        """A page of the tenant's conversations as `query` says (or its
        fields as keywords: metadata, archived, created_from, created_to,
        updated_from, updated_to, order, cursor, limit)."""
        return await self.call(calls.list_conversations(_listing(query, filters)))

    async def iter_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> AsyncIterator[Conversation]:
        """Every conversation `list_conversations` would list, page after
        page (of `limit` each)."""
        search = _listing(query, filters)
        while True:
            page = await self.list_conversations(search)
            for conversation in page.items:
                yield conversation
            if page.next_cursor is None:
                return
            search = dataclasses.replace(search, cursor=page.next_cursor)

    async def update_metadata(
        self,
        conversation_id: ConversationRef,
        /,
        patch: dict[str, Any],
        *,
        replace: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> Conversation:
        return await self.call(
            calls.update_metadata(
                conversation_id, patch, replace=replace, expected_version=expected_version
            )
        )

    async def archive(self, conversation_id: ConversationRef, /) -> Conversation:
        return await self.call(calls.set_archived(conversation_id, True))

    async def unarchive(self, conversation_id: ConversationRef, /) -> Conversation:
        return await self.call(calls.set_archived(conversation_id, False))

    async def delete(self, conversation_id: ConversationRef, /) -> None:
        await self.call(calls.delete(conversation_id))

    # --- messages and agents ------------------------------------------------------------

    async def append_messages(
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
        return await self.call(
            calls.append_messages(
                conversation_id,
                messages,
                expected_version=expected_version,
                idempotency_key=idempotency_key,
            )
        )

    async def replace(
        self,
        conversation_id: ConversationRef,
        /,
        seq: int,
        content: Content,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return await self.call(calls.replace(conversation_id, seq, content, expected_version))

    async def configure_agent(
        self,
        conversation_id: ConversationRef,
        /,
        profile: AgentProfile,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return await self.call(calls.configure_agent(conversation_id, profile, expected_version))

    update_slot = forwarding(Repository.update_slot, calls.update_slot)

    async def context_slots(
        self, conversation_id: ConversationRef, /, agent_id: str = MAIN_AGENT
    ) -> ContextSlots:
        return (await self.agent(conversation_id, agent_id)).slots

    async def agent_profile(
        self, conversation_id: ConversationRef, /, agent_id: str = MAIN_AGENT
    ) -> AgentProfile:
        return (await self.agent(conversation_id, agent_id)).profile

    async def agent(self, conversation_id: ConversationRef, /, agent_id: str) -> AgentState:
        """The agent's profile and slots, in one request."""
        return await self.call(calls.agent(conversation_id, agent_id))

    # --- batches, forks, pins ------------------------------------------------------------

    async def run_batch_operation(
        self,
        conversation_id: ConversationRef,
        /,
        operation: BatchOperation,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        """Any batch operation (start_batch, truncate, filter, clear, insert,
        rollback_to_batch) as the store's value (`store.domain.operations`)."""
        return await self.call(
            calls.run_batch_operation(conversation_id, operation, expected_version)
        )

    truncate = operating(Truncate, ConversationRepository.truncate)
    clear = operating(Clear, ConversationRepository.clear)

    async def batches(self, conversation_id: ConversationRef, /) -> list[Batch]:
        return await self.call(calls.batches(conversation_id))

    async def batch_messages(
        self, conversation_id: ConversationRef, /, batch: int
    ) -> list[StoredMessage]:
        return await self.call(calls.batch_messages(conversation_id, batch))

    fork = forwarding(Repository.fork, calls.fork)

    async def pin_message(
        self,
        conversation_id: ConversationRef,
        /,
        seq: int,
        pinned: bool = True,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return await self.call(calls.pin_message(conversation_id, seq, pinned, expected_version))


def _listing(query: ConversationQuery | None, filters: dict[str, Any]) -> ConversationQuery:
    """The query, or one of the filters; not both (as `Repository.list_conversations`)."""
    if query is None:
        return conversation_query(**filters)
    if filters:
        raise InvalidOperation(f"a query, or filters, not both: {', '.join(sorted(filters))}")
    return query
