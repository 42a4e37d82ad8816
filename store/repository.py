"""The agents' and analysts' async API, written once over a storage port.

    repository = Repository(await PostgresStorage.connect(url))   # or
    repository = InMemoryRepository()                             # store.testing

Every write runs the same way, whatever the storage (`store.storage`):
lock the conversation's stream row → answer an idempotent retry from what
the first attempt stored → check the expected version → decide the events
(`store.commands`, against the locked state) → derive the views' changes
(`store.projections.projector`) → write events, views and the request in
one transaction → answer from what was decided, without reading back.

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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from store import commands
from store import window as win
from store.codec import stored_from
from store.commands import Limits
from store.context import AgentProfile, ContextSlots, TodoItem
from store.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationNotFound,
    IdempotencyConflict,
    InvalidOperation,
)
from store.events import (
    BatchStarted,
    ConversationArchived,
    ConversationPurged,
    ConversationStarted,
    DomainEvent,
    MessageAppended,
)
from store.idempotency import client_ids, replay_by_client_ids, request_hash
from store.inputs import idempotency_key_problem
from store.messages import MAIN_AGENT, ROLES, Content, Message, Role, StoredMessage
from store.operations import (
    BatchOperation,
    Clear,
    Filter,
    Insert,
    RollbackToBatch,
    StartBatch,
    Truncate,
    refusal,
)
from store.projections.projector import Recorded, project
from store.records import ExpectedVersion, StreamState
from store.storage import (
    EventToWrite,
    HistoryPage,
    Lookups,
    Storage,
    StoredRequest,
    StreamRow,
    Write,
    WriteSession,
)
from store.validation import call_ids_involved, parse_message
from store.values import Appended, Batch, BatchResult, Conversation, Scope, ToolBlock

if TYPE_CHECKING:
    from store.assembler import Assembly

__all__ = [
    "ANY",
    "Appended",
    "Batch",
    "BatchResult",
    "Conversation",
    "Repository",
    "Scope",
    "ToolBlock",
]

DEFAULT_TENANT = "default"
ANY = StreamState.ANY
MAX_READ_LIMIT = 1000


def check_expected(
    conversation_id: uuid.UUID, expected: ExpectedVersion, actual: int | None
) -> None:
    """Raise ConcurrencyConflict unless the stream is where the caller expects."""
    if expected is StreamState.ANY:
        return
    if expected is StreamState.NO_STREAM:
        if actual is not None and actual > 0:
            raise ConcurrencyConflict(conversation_id, "no stream", actual)
        return
    if (actual or 0) != expected:
        raise ConcurrencyConflict(conversation_id, expected, actual)


def _operation(kind: type[BatchOperation], **fields: Any) -> BatchOperation:
    """A batch operation value from keyword arguments, or InvalidOperation."""
    try:
        return kind(**fields)
    except ValidationError as error:
        raise refusal(error) from None


def _role(role: str) -> Role:
    if role not in ROLES:
        raise InvalidOperation(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    return role


class Repository:
    """The store's API for one tenant, over a `Storage`."""

    def __init__(
        self,
        storage: Storage,
        *,
        tenant: str = DEFAULT_TENANT,
        limits: Limits | None = None,
    ) -> None:
        self.storage = storage
        self.tenant = tenant
        self.limits = limits or Limits()

    def for_tenant(self, tenant: str, *, limits: Limits | None = None) -> Repository:
        """A repository of `tenant` over the same storage."""
        return Repository(self.storage, tenant=tenant, limits=limits or self.limits)

    # --- the write path ----------------------------------------------------

    def _writable(self, conversation_id: uuid.UUID, stream: StreamRow | None) -> StreamRow:
        if stream is None or stream.tenant != self.tenant:
            # Another tenant's conversation looks exactly like a missing one.
            raise ConversationNotFound(conversation_id)
        if stream.deleted:
            raise ConversationDeleted(conversation_id)
        return stream

    @staticmethod
    async def _record(
        session: WriteSession,
        stream: StreamRow,
        events: Sequence[DomainEvent],
        request: tuple[str, str] | None = None,
    ) -> list[Recorded]:
        """Write `events` after the stream's version, with their views."""
        await _check_client_ids(session, events)
        recorded = [
            Recorded(version=stream.version + i, recorded_at=stream.now, event=event)
            for i, event in enumerate(events, start=1)
        ]
        remembered = None
        if request is not None:
            key, hash_ = request
            remembered = (
                key,
                StoredRequest(
                    request_hash=hash_,
                    first_version=recorded[0].version,
                    last_version=recorded[-1].version,
                ),
            )
        await session.write(
            Write(
                events=tuple(
                    EventToWrite(version=r.version, type=r.event.type, data=r.event.data())
                    for r in recorded
                ),
                changes=project(stream.head, recorded),
                request=remembered,
            )
        )
        return recorded

    async def _command(
        self,
        conversation_id: uuid.UUID,
        expected_version: ExpectedVersion,
        decide: Any,
    ) -> tuple[int, list[Recorded]]:
        """Lock, check, decide with `decide(session)`, record; the new version."""
        async with self.storage.writing(conversation_id, self.tenant) as session:
            stream = self._writable(conversation_id, session.stream)
            check_expected(conversation_id, expected_version, stream.version)
            events = await decide(session)
            recorded = await self._record(session, stream, events)
            return stream.version + len(recorded), recorded

    # --- conversations -------------------------------------------------------

    async def create_conversation(
        self, conversation_id: uuid.UUID | None = None, *, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        conversation_id = conversation_id or uuid.uuid4()
        try:
            started = ConversationStarted(tenant=self.tenant, metadata=metadata or {})
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'conversation'}: {e['msg']}"
                for e in error.errors()
            )
            raise InvalidOperation(f"invalid conversation: {problems}") from None
        async with self.storage.writing(conversation_id, self.tenant, create=True) as session:
            stream = self._writable(conversation_id, session.stream)
            check_expected(conversation_id, StreamState.NO_STREAM, stream.version)
            await self._record(session, stream, [started])
        return Conversation(
            id=conversation_id,
            tenant=self.tenant,
            version=1,
            current_batch=1,
            next_seq=1,
            archived=False,
            started_at=stream.now,
            metadata=started.metadata,
        )

    async def get_conversation(self, conversation_id: uuid.UUID) -> Conversation:
        return await self.storage.conversation(conversation_id, self.tenant)

    async def archive(self, conversation_id: uuid.UUID) -> Conversation:
        async def decide(session: WriteSession) -> list[DomainEvent]:
            return [ConversationArchived()]

        await self._command(conversation_id, ANY, decide)
        return await self.get_conversation(conversation_id)

    async def delete(self, conversation_id: uuid.UUID) -> None:
        """Purge the conversation: its events, requests and views.

        One event without content remains, so feed readers learn of the
        deletion; the stream row stays as a tombstone so the id cannot be
        reused by mistake. This is what makes a GDPR erasure possible.
        """
        async with self.storage.writing(conversation_id, self.tenant) as session:
            stream = self._writable(conversation_id, session.stream)
            await session.purge()
            await self._record(session, stream, [ConversationPurged()])

    # --- writes ----------------------------------------------------------------

    async def append_messages(
        self,
        conversation_id: uuid.UUID,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
        idempotency_key: str | None = None,
    ) -> Appended:
        """Append messages in one transaction: all are stored, or none.

        A retry with the same `idempotency_key` (or the same client message
        ids) returns what the first attempt stored, and writes nothing.
        """
        if idempotency_key is not None:
            problem = idempotency_key_problem(idempotency_key)
            if problem is not None:
                raise InvalidOperation(f"idempotency key {problem}")
        parsed = [parse_message(m, i) for i, m in enumerate(messages)]
        if not parsed:
            raise InvalidOperation("append needs at least one message")
        ids = client_ids(parsed)
        lookups = Lookups(
            call_ids=frozenset(call_ids_involved(parsed)),
            client_ids=tuple(ids),
            idempotency_key=idempotency_key,
        )
        hash_ = request_hash(parsed) if idempotency_key is not None else ""
        async with self.storage.writing(conversation_id, self.tenant, lookups=lookups) as session:
            stream = self._writable(conversation_id, session.stream)
            # A retry is answered before the expected version is checked: the
            # first attempt already moved the version on.
            replay = await self._find_replay(session, parsed, idempotency_key, hash_)
            if replay is not None:
                return Appended(
                    conversation_id=conversation_id,
                    version=stream.version,
                    messages=tuple(replay),
                    replayed=True,
                )
            check_expected(conversation_id, expected_version, stream.version)
            events = await commands.append_messages(session, parsed, self.limits)
            request = (idempotency_key, hash_) if idempotency_key is not None else None
            recorded = await self._record(session, stream, events, request)
        return Appended(
            conversation_id=conversation_id,
            version=stream.version + len(recorded),
            messages=tuple(_stored(recorded, stream)),
        )

    @staticmethod
    async def _find_replay(
        session: WriteSession,
        parsed: Sequence[Message],
        idempotency_key: str | None,
        hash_: str,
    ) -> list[StoredMessage] | None:
        """The messages an earlier identical append stored, if this is a retry."""
        if idempotency_key is not None:
            request = await session.request(idempotency_key)
            if request is None:
                return None
            if request.request_hash != hash_:
                raise IdempotencyConflict(idempotency_key, "the request differs from the first one")
            return await session.messages_written_by(request.first_version, request.last_version)
        ids = client_ids(parsed)
        if not ids:
            return None
        return replay_by_client_ids(parsed, await session.messages_by_client_id(ids))

    async def replace(
        self,
        conversation_id: uuid.UUID,
        seq: int,
        content: Content,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        """Edit a message's content; the original stays in the log."""

        async def decide(session: WriteSession) -> list[DomainEvent]:
            return await commands.replace_content(session, seq, content, self.limits)

        version, _ = await self._command(conversation_id, expected_version, decide)
        return version

    async def configure_agent(
        self,
        conversation_id: uuid.UUID,
        profile: AgentProfile,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        async def decide(session: WriteSession) -> list[DomainEvent]:
            return commands.configure_agent(profile)

        version, _ = await self._command(conversation_id, expected_version, decide)
        return version

    async def update_slot(
        self,
        conversation_id: uuid.UUID,
        slot: str,
        value: str | Sequence[TodoItem] | None,
        *,
        agent_id: str = MAIN_AGENT,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        async def decide(session: WriteSession) -> list[DomainEvent]:
            return commands.update_slot(agent_id, slot, value)

        version, _ = await self._command(conversation_id, expected_version, decide)
        return version

    # --- batch operations (docs/behaviours.md §4) ---------------------------------------

    async def run_batch_operation(
        self,
        conversation_id: uuid.UUID,
        operation: BatchOperation,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        """Start a new batch as `operation` says; nothing is deleted."""
        async with self.storage.writing(conversation_id, self.tenant) as session:
            stream = self._writable(conversation_id, session.stream)
            check_expected(conversation_id, expected_version, stream.version)
            events = await commands.decide_batch_operation(session, operation, self.limits)
            recorded = await self._record(session, stream, events)
            started = next(r.event for r in recorded if isinstance(r.event, BatchStarted))
            source = await session.batch_window(started.source_batch) or []
            shown = win.apply_batch(
                source,
                win.BatchDefinition(boundary=started.boundary, retained=started.retained),
            )
            arrived = sum(
                isinstance(r.event, MessageAppended) and r.event.batch == started.batch
                for r in recorded
            )
        return BatchResult(
            conversation_id=conversation_id,
            version=stream.version + len(recorded),
            batch=started.batch,
            visible=len(shown) + arrived,
        )

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
        operation = _operation(
            StartBatch,
            boundary_seq=boundary_seq,
            summary=summary,
            retain=tuple(retain),
            adjust=adjust,
        )
        return await self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
        )

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
        operation = _operation(
            Truncate,
            keep_first=keep_first,
            keep_last=keep_last,
            remove_first=remove_first,
            remove_last=remove_last,
            range=range_,
            role=role,
            adjust=adjust,
        )
        return await self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
        )

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
        operation = _operation(
            Filter,
            roles=tuple(roles) if roles is not None else None,
            content_contains=tuple(content_contains) if content_contains else None,
            content_excludes=tuple(content_excludes) if content_excludes else None,
            adjust=adjust,
        )
        return await self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
        )

    async def clear(
        self,
        conversation_id: uuid.UUID,
        *,
        keep_system: bool = True,
        adjust: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        return await self.run_batch_operation(
            conversation_id,
            _operation(Clear, keep_system=keep_system, adjust=adjust),
            expected_version=expected_version,
        )

    async def insert(
        self,
        conversation_id: uuid.UUID,
        position: int,
        messages: Sequence[Message | dict[str, Any]],
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> BatchResult:
        parsed = tuple(parse_message(m, i) for i, m in enumerate(messages))
        if not parsed:
            raise InvalidOperation("insert needs at least one message")
        return await self.run_batch_operation(
            conversation_id,
            _operation(Insert, position=position, messages=parsed),
            expected_version=expected_version,
        )

    async def rollback_to_batch(
        self, conversation_id: uuid.UUID, batch: int, *, expected_version: ExpectedVersion = ANY
    ) -> BatchResult:
        return await self.run_batch_operation(
            conversation_id,
            _operation(RollbackToBatch, batch=batch),
            expected_version=expected_version,
        )

    # --- reads ---------------------------------------------------------------

    async def visible_window(
        self, conversation_id: uuid.UUID, *, batch: int | None = None, agent_id: str | None = None
    ) -> list[StoredMessage]:
        return await self.storage.window(
            conversation_id, self.tenant, batch=batch, agent_id=agent_id
        )

    async def recent_by_role(
        self,
        conversation_id: uuid.UUID,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        role = _role(role)
        if n < 0:
            raise InvalidOperation(f"recent_by_role needs n >= 0, got {n}")
        if n > MAX_READ_LIMIT:
            raise InvalidOperation(f"recent_by_role reads at most {MAX_READ_LIMIT}, got n={n}")
        if scope == "history":
            return await self.storage.recent_in_history(
                conversation_id, self.tenant, role, n, agent_id
            )
        if scope != "visible":
            raise InvalidOperation(f"unknown scope {scope!r}; scopes are visible, history")
        return await self.storage.recent_in_window(conversation_id, self.tenant, role, n, agent_id)

    async def role_range(
        self, conversation_id: uuid.UUID, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        role = _role(role)
        if first < 1 or last < first:
            raise InvalidOperation(f"role_range needs 1 <= first <= last, got {first}..{last}")
        if last - first + 1 > MAX_READ_LIMIT:
            raise InvalidOperation(f"role_range reads at most {MAX_READ_LIMIT} messages at once")
        return await self.storage.role_range(conversation_id, self.tenant, role, first, last)

    async def count_by_role(
        self, conversation_id: uuid.UUID, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        if scope == "history":
            return await self.storage.count_in_history(conversation_id, self.tenant)
        if scope != "visible":
            raise InvalidOperation(f"unknown scope {scope!r}; scopes are visible, history")
        return await self.storage.count_in_window(conversation_id, self.tenant)

    async def read_messages(
        self,
        conversation_id: uuid.UUID,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
    ) -> list[StoredMessage]:
        """A keyset page of the whole history, by seq: `order="desc", limit=N`
        is "the last N messages", O(N) at any history length."""
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidOperation(f"limit must be 1..{MAX_READ_LIMIT}, got {limit}")
        if order not in ("asc", "desc"):
            raise InvalidOperation(f"order must be 'asc' or 'desc', got {order!r}")
        page = HistoryPage(
            after_seq=after_seq, before_seq=before_seq, limit=limit, descending=order == "desc"
        )
        return await self.storage.history(conversation_id, self.tenant, page)

    async def tool_blocks(
        self, conversation_id: uuid.UUID, *, pending_only: bool = False, agent_id: str | None = None
    ) -> list[ToolBlock]:
        return await self.storage.tool_blocks(
            conversation_id, self.tenant, pending_only=pending_only, agent_id=agent_id
        )

    async def batch_messages(self, conversation_id: uuid.UUID, batch: int) -> list[StoredMessage]:
        """The messages that arrived while batch `batch` was current."""
        return await self.storage.batch_messages(conversation_id, self.tenant, batch)

    async def batches(self, conversation_id: uuid.UUID) -> list[Batch]:
        return await self.storage.batches(conversation_id, self.tenant)

    async def context_slots(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> ContextSlots:
        _, slots = await self.storage.agent(conversation_id, self.tenant, agent_id)
        return slots

    async def agent_profile(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> AgentProfile:
        profile, _ = await self.storage.agent(conversation_id, self.tenant, agent_id)
        return profile

    async def assemble(
        self,
        conversation_id: uuid.UUID,
        *,
        agent_id: str = MAIN_AGENT,
        format: str = "openai-chat",
        options: Any = None,
    ) -> Assembly:
        """The payload of this agent's next LLM call, from its visible window
        and its context slots as they are now."""
        from store.assembler import assemble

        found = await self.storage.assembly_input(conversation_id, self.tenant, agent_id)
        return assemble(
            found.window, profile=found.profile, slots=found.slots, format=format, options=options
        )


async def _check_client_ids(session: WriteSession, events: Sequence[DomainEvent]) -> None:
    """A client message id names one message of the conversation, ever."""
    ids = [
        e.message.client_message_id
        for e in events
        if isinstance(e, MessageAppended) and e.message.client_message_id is not None
    ]
    if not ids:
        return
    taken = sorted(
        {i for i in ids if ids.count(i) > 1} | set(await session.messages_by_client_id(ids))
    )
    if taken:
        raise IdempotencyConflict(
            ",".join(taken), "a client id in this append is already used by another message"
        )


def _stored(recorded: Sequence[Recorded], stream: StreamRow) -> list[StoredMessage]:
    """The appended messages as stored, from what was decided (no read-back)."""
    ordinals = dict(stream.head.role_counts)
    stored = []
    for item in recorded:
        event = item.event
        if not isinstance(event, MessageAppended):
            continue
        message = event.message
        ordinals[message.role] += 1
        stored.append(
            stored_from(
                message,
                seq=event.seq,
                batch=event.batch,
                role_ordinal=ordinals[message.role],
                recorded_at=item.recorded_at,
            )
        )
    return stored
