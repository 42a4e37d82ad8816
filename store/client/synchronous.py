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

import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel

from store.client import calls
from store.client.asynchronous import DEFAULT_TIMEOUT, PAGE, client_headers
from store.client.calls import AgentState, Assembled, Call
from store.client.problems import error_from
from store.client.retrying import RetryPolicy, retryable, retrying, wait_before_retry
from store.client.sse import EventStreamReader
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.conversation_keys import ConversationRef
from store.domain.feed import FeedEvent, FeedPage, checkpoint, parse_checkpoint
from store.domain.listing import ConversationOrder, ConversationPage, MessagePage, WindowSlice
from store.domain.messages import MAIN_AGENT, Content, Message, Role, StoredMessage
from store.domain.operations import BatchOperation
from store.domain.records import ExpectedVersion, FeedPosition, StreamState
from store.domain.search import SearchHit, SearchPage, SearchQuery
from store.domain.values import Appended, Batch, BatchResult, Conversation, Scope, ToolBlock

T = TypeVar("T")

ANY = StreamState.ANY


class ConvoClient:
    """The convo-store HTTP API for one API key (so one tenant).

    `base_url`: where `convo serve` listens. `api_key`: a key from
    `convo keys create`. `retry`: how requests turned away for now are
    retried. `idempotency_keys`: give each append a fresh key (default)
    unless it names one. `http`: an `httpx.Client` to send with
    instead of the client's own (it then sends the key only if that one
    does; closing it is the caller's). `transport`: what the client's own
    sends through (e.g. `httpx.WSGITransport`, `httpx.MockTransport`).
    `sleep`: how it waits between tries (tests record the waits)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        idempotency_keys: bool = True,
        http: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.idempotency_keys = idempotency_keys
        self._sleep = sleep
        self._owned = http is None
        self.http = http or httpx.Client(
            base_url=base_url,
            headers=client_headers(api_key),
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> ConvoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            self.http.close()

    def call(self, call: Call[T]) -> T:
        """Send `call`, retrying as `retry` says; its answer, or the error it stands for."""
        for attempt in retrying(self.retry, replayable=call.replayable, sleep=self._sleep):
            with attempt:
                response = self.http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.body,
                    headers=call.headers,
                )
                if response.is_error:
                    raise error_from(
                        response,
                        conversation_id=call.conversation_id,
                        idempotency_key=call.idempotency_key,
                    )
                return call.read(response)
        raise AssertionError("tenacity stops by raising")  # pragma: no cover

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
        self,
        *,
        metadata: dict[str, Any] | None = None,
        archived: bool | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        updated_from: datetime | None = None,
        updated_to: datetime | None = None,
        order: ConversationOrder = "newest",
        cursor: str | None = None,
        limit: int = 50,
    ) -> ConversationPage:
        return self.call(
            calls.list_conversations(
                metadata=metadata,
                archived=archived,
                created_from=created_from,
                created_to=created_to,
                updated_from=updated_from,
                updated_to=updated_to,
                order=order,
                cursor=cursor,
                limit=limit,
            )
        )

    def iter_conversations(
        self,
        *,
        metadata: dict[str, Any] | None = None,
        archived: bool | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        updated_from: datetime | None = None,
        updated_to: datetime | None = None,
        order: ConversationOrder = "newest",
        page_size: int = 100,
    ) -> Iterator[Conversation]:
        """Every conversation `list_conversations` would list, page after page."""
        cursor: str | None = None
        while True:
            page = self.list_conversations(
                metadata=metadata,
                archived=archived,
                created_from=created_from,
                created_to=created_to,
                updated_from=updated_from,
                updated_to=updated_to,
                order=order,
                cursor=cursor,
                limit=page_size,
            )
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

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

    # --- reads ------------------------------------------------------------------------

    def visible_window(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        batch: int | None = None,
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        """The whole window, read a page at a time."""
        found: list[StoredMessage] = []
        cursor: str | None = None
        while True:
            page = self.read_window(
                conversation_id, batch=batch, agent_id=agent_id, cursor=cursor, limit=PAGE
            )
            found.extend(page.items)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    def read_window(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        batch: int | None = None,
        agent_id: str | None = None,
        cursor: str | None = None,
        limit: int = PAGE,
    ) -> WindowSlice:
        return self.call(
            calls.read_window(
                conversation_id, batch=batch, agent_id=agent_id, cursor=cursor, limit=limit
            )
        )

    def read_messages(
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
    ) -> list[StoredMessage]:
        page = self.page_messages(
            conversation_id,
            after_seq=after_seq,
            before_seq=before_seq,
            limit=limit,
            order=order,
            role=role,
            agent_id=agent_id,
            kind=kind,
            scope=scope,
        )
        return list(page.items)

    def page_messages(
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
    ) -> MessagePage:
        return self.call(
            calls.page_messages(
                conversation_id,
                after_seq=after_seq,
                before_seq=before_seq,
                limit=limit,
                order=order,
                role=role,
                agent_id=agent_id,
                kind=kind,
                scope=scope,
            )
        )

    def iter_messages(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        order: Literal["asc", "desc"] = "asc",
        role: Role | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        scope: Scope = "history",
        page_size: int = PAGE,
    ) -> Iterator[StoredMessage]:
        """Every message (of `role`, `agent_id`, `kind`), oldest or newest
        first, read a page at a time."""
        after: int | None = None
        before: int | None = None
        while True:
            page = self.page_messages(
                conversation_id,
                after_seq=after,
                before_seq=before,
                limit=page_size,
                order=order,
                role=role,
                agent_id=agent_id,
                kind=kind,
                scope=scope,
            )
            yield from page.items
            after, before = page.next_after_seq, page.next_before_seq
            if after is None and before is None:
                return

    def recent_by_role(
        self,
        conversation_id: ConversationRef,
        /,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        return self.call(calls.recent_by_role(conversation_id, role, n, scope, agent_id))

    def role_range(
        self, conversation_id: ConversationRef, /, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        return self.call(calls.role_range(conversation_id, role, first, last))

    def count_by_role(
        self, conversation_id: ConversationRef, /, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        return self.call(calls.count_by_role(conversation_id, scope))

    def tool_blocks(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        pending_only: bool = False,
        agent_id: str | None = None,
    ) -> list[ToolBlock]:
        return self.call(
            calls.tool_blocks(conversation_id, pending_only=pending_only, agent_id=agent_id)
        )

    def search_messages(self, query: SearchQuery) -> SearchPage:
        return self.call(calls.search_messages(query))

    def iter_search(self, query: SearchQuery) -> Iterator[SearchHit]:
        """Every hit of `query`, newest first, page after page."""
        while True:
            page = self.search_messages(query)
            yield from page.hits
            if page.next_cursor is None:
                return
            query = query.model_copy(update={"cursor": page.next_cursor})

    def assemble(
        self,
        conversation_id: ConversationRef,
        /,
        *,
        agent_id: str = MAIN_AGENT,
        format: str = "openai-chat",
        options: dict[str, Any] | BaseModel | None = None,
    ) -> Assembled:
        if isinstance(options, BaseModel):
            options = options.model_dump(mode="json", exclude_unset=True)
        return self.call(
            calls.assemble(conversation_id, agent_id=agent_id, format=format, options=options)
        )

    # --- the feed ---------------------------------------------------------------------

    def read_events(self, *, after: FeedPosition | None = None, limit: int = 100) -> FeedPage:
        return self.call(calls.read_events(after, limit))

    def iter_events(
        self, *, after: FeedPosition | None = None, page_size: int = PAGE
    ) -> Iterator[FeedEvent]:
        """The tenant's events after `after` (None: from the start) up to the
        feed's current end, page after page (`tail` waits for more)."""
        while True:
            page = self.read_events(after=after, limit=page_size)
            yield from page.events
            after = parse_checkpoint(page.next)
            if not page.more:
                return

    def conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, limit: int = 100
    ) -> list[FeedEvent]:
        return self.call(
            calls.conversation_events(conversation_id, from_version=from_version, limit=limit)
        )

    def iter_conversation_events(
        self, conversation_id: ConversationRef, /, *, from_version: int = 1, page_size: int = PAGE
    ) -> Iterator[FeedEvent]:
        """The conversation's events from `from_version` on, page after page."""
        while True:
            events = self.conversation_events(
                conversation_id, from_version=from_version, limit=page_size
            )
            yield from events
            if len(events) < page_size:
                return
            from_version = events[-1].version + 1

    def tail(
        self,
        after: FeedPosition | str | None = None,
        *,
        heartbeat: float | None = None,
    ) -> Iterator[FeedEvent]:
        """The tenant's events as they commit (Server-Sent Events), forever.

        `after`: a checkpoint to start after (None: from now on). A stream
        that breaks is opened again after the last event or heartbeat seen
        (`Last-Event-ID`), so no event is skipped or repeated; the breaks
        in a row are retried as `retry` says."""
        reader = EventStreamReader(checkpoint(after) if isinstance(after, FeedPosition) else after)
        params = calls.query(heartbeat=heartbeat)
        failures = 0
        while True:
            headers = {} if reader.last_id is None else {"Last-Event-ID": reader.last_id}
            try:
                with self.http.stream(
                    "GET", "/events/stream", params=params, headers=headers, timeout=None
                ) as response:
                    if response.is_error:
                        response.read()
                        raise error_from(response)
                    failures = 0
                    for line in response.iter_lines():
                        event = reader.line(line)
                        if event is not None:
                            yield event
                # The service ended the stream (it is shutting down): open it again.
            except Exception as error:
                failures += 1
                if not retryable(True)(error) or failures >= self.retry.attempts:
                    raise
                (self._sleep or time.sleep)(wait_before_retry(self.retry, failures, error))
