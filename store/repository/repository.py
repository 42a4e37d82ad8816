"""The agents' and analysts' async API, written once over a storage port.

    repository = Repository(await PostgresStorage.connect(url))   # or
    repository = InMemoryRepository()                             # store.memory

Every write runs the same way, whatever the storage (`store.repository.port`):
lock the conversation's stream row → answer an idempotent retry from what
the first attempt stored → check the expected version → decide the events
(`store.domain.commands`, against the locked state) → derive the views' changes
(`store.domain.projector`) → write events, views and the request in
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

import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from store.domain import commands, feed
from store.domain import window as win
from store.domain.codec import collector_paused, stored_from, trusted
from store.domain.commands import Limits
from store.domain.context import TODO, AgentProfile, ContextSlots, TodoItem
from store.domain.conversation_keys import (
    ConversationRef,
    addressed,
    conversation_key,
    current_key,
    new_key,
    stream_id,
)
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationExists,
    ConversationIsArchived,
    ConversationNotFound,
    IdempotencyConflict,
    InvalidOperation,
)
from store.domain.events import (
    AgentConfigured,
    BatchStarted,
    ContextSlotUpdated,
    ConversationArchived,
    ConversationForked,
    ConversationPurged,
    ConversationStarted,
    ConversationUnarchived,
    DomainEvent,
    MessageAppended,
)
from store.domain.feed import ChangedConversation, FeedEvent, FeedPage
from store.domain.idempotency import client_ids, replay_by_client_ids, request_hash
from store.domain.inputs import (
    MAX_AGENT_ID_CHARS,
    MAX_METADATA_CHARS,
    idempotency_key_problem,
    identifier_problem,
    json_problem,
)
from store.domain.listing import (
    ConversationOrder,
    ConversationPage,
    ConversationQuery,
    MessagePage,
    WindowSlice,
    decode_conversation_cursor,
    decode_window_cursor,
    encode_conversation_cursor,
    encode_window_cursor,
)
from store.domain.messages import (
    MAIN_AGENT,
    ROLES,
    Content,
    Message,
    MessageKind,
    Role,
    StoredMessage,
)
from store.domain.operations import (
    MAX_INT,
    BatchOperation,
    Clear,
    Filter,
    Insert,
    RollbackToBatch,
    StartBatch,
    Truncate,
    refusal,
)
from store.domain.projector import Changes, CopyForked, Recorded, project
from store.domain.records import ExpectedVersion, FeedPosition, StreamState
from store.domain.search import SearchPage, SearchQuery
from store.domain.validation import call_ids_involved, parse_message
from store.domain.values import Appended, Batch, BatchResult, Conversation, Scope, ToolBlock
from store.repository.port import (
    EventToWrite,
    ForkSource,
    HistoryPage,
    Lookups,
    StaleHead,
    Storage,
    StoredRequest,
    StreamRow,
    WindowPage,
    Write,
    WriteSession,
)

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
    conversation_id: ConversationRef, expected: ExpectedVersion, actual: int | None
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

    def _writable(
        self,
        conversation_id: ConversationRef,
        stream: StreamRow | None,
        *,
        archived_too: bool = False,
    ) -> StreamRow:
        """The locked stream, if this tenant may write to it. An archived
        conversation is read-only (every write refuses it, here, under the
        lock) but for the writes that pass `archived_too`: archive,
        unarchive and delete."""
        if stream is None or stream.tenant != self.tenant:
            # Another tenant's conversation looks exactly like a missing one.
            raise ConversationNotFound(conversation_id)
        if stream.deleted:
            raise ConversationDeleted(conversation_id)
        if stream.archived and not archived_too:
            raise ConversationIsArchived(conversation_id)
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
        recorded_at = await session.write(
            Write(
                events=tuple(
                    EventToWrite(version=r.version, type=r.event.type, data=r.event.data())
                    for r in recorded
                ),
                changes=project(stream.head, recorded),
                request=remembered,
            )
        )
        if recorded_at is not None:  # learned only as it wrote (an optimistic write)
            # Built anew, not `dataclasses.replace`d: replace reads the
            # class's fields on every call, 5% of a 100-message append.
            recorded = [
                Recorded(version=r.version, recorded_at=recorded_at, event=r.event)
                for r in recorded
            ]
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
        self,
        conversation_id: ConversationRef | None = None,
        *,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        """Start a conversation under the id the caller chose (a new UUID's
        text when none): `ConversationExists` if this tenant has it already."""
        key = new_key() if conversation_id is None else conversation_id
        return await self._create(key, metadata)

    @addressed
    async def _create(
        self, conversation_id: uuid.UUID, metadata: dict[str, Any] | None
    ) -> Conversation:
        key = current_key()
        try:
            started = ConversationStarted(tenant=self.tenant, key=key, metadata=metadata or {})
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'conversation'}: {e['msg']}"
                for e in error.errors()
            )
            raise InvalidOperation(f"invalid conversation: {problems}") from None
        try:
            async with self.storage.writing(conversation_id, self.tenant, create=key) as session:
                # An archived conversation of that id exists too.
                stream = self._writable(conversation_id, session.stream, archived_too=True)
                check_expected(conversation_id, StreamState.NO_STREAM, stream.version)
                await self._record(session, stream, [started])
        except ConcurrencyConflict as conflict:
            # The id is taken: found here, or by the database's key in a race.
            raise ConversationExists(key, conflict.actual) from None
        return Conversation(
            id=key,
            tenant=self.tenant,
            version=1,
            current_batch=1,
            next_seq=1,
            archived=False,
            started_at=stream.now,
            metadata=started.metadata,
            updated_at=stream.now,
        )

    @addressed
    async def get_conversation(self, conversation_id: uuid.UUID) -> Conversation:
        return await self.storage.conversation(conversation_id, self.tenant)

    @addressed
    async def archive(self, conversation_id: uuid.UUID) -> Conversation:
        """Make the conversation read-only (`ConversationIsArchived` for every
        write but unarchive and delete). Archiving an archived one writes nothing."""
        await self._set_archived(conversation_id, archived=True)
        return await self.get_conversation(conversation_id)

    @addressed
    async def unarchive(self, conversation_id: uuid.UUID) -> Conversation:
        """Make an archived conversation writable again (a no-op if it is not)."""
        await self._set_archived(conversation_id, archived=False)
        return await self.get_conversation(conversation_id)

    async def _set_archived(self, conversation_id: uuid.UUID, *, archived: bool) -> None:
        async with self.storage.writing(conversation_id, self.tenant) as session:
            stream = self._writable(conversation_id, session.stream, archived_too=True)
            if stream.archived != archived:
                event = ConversationArchived() if archived else ConversationUnarchived()
                await self._record(session, stream, [event])

    @addressed
    async def update_metadata(
        self,
        conversation_id: uuid.UUID,
        patch: dict[str, Any],
        *,
        replace: bool = False,
        expected_version: ExpectedVersion = ANY,
    ) -> Conversation:
        """Merge `patch` into the conversation's metadata (JSON merge patch:
        a null removes its key, an object merges, anything else replaces),
        or with `replace` make `patch` the metadata. Recorded as an event;
        a patch that changes nothing writes nothing."""
        problem = json_problem(patch, max_chars=MAX_METADATA_CHARS, what="metadata")
        if problem is not None:
            raise InvalidOperation(f"invalid metadata: {problem}")
        async with self.storage.writing(conversation_id, self.tenant) as session:
            stream = self._writable(conversation_id, session.stream)
            check_expected(conversation_id, expected_version, stream.version)
            current = await self.storage.conversation(conversation_id, self.tenant)
            events = commands.change_metadata(current.metadata, patch, replace=replace)
            if events:
                await self._record(session, stream, events)
        return await self.get_conversation(conversation_id)

    async def list_conversations(
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
        """A page of this tenant's conversations (deleted ones are not
        listed), newest or oldest first by creation time, ties by id; only
        those whose metadata contains `metadata` (as jsonb `@>`), archived
        or not, created / last written in [from, to). `cursor` is a page's
        `next_cursor`."""
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidOperation(f"limit must be 1..{MAX_READ_LIMIT}, got {limit}")
        if order not in ("newest", "oldest"):
            raise InvalidOperation(f"order must be 'newest' or 'oldest', got {order!r}")
        if metadata is not None:
            problem = json_problem(metadata, max_chars=MAX_METADATA_CHARS, what="metadata")
            if problem is not None:
                raise InvalidOperation(f"invalid metadata filter: {problem}")
        for name, moment in (
            ("created_from", created_from),
            ("created_to", created_to),
            ("updated_from", updated_from),
            ("updated_to", updated_to),
        ):
            if moment is not None and moment.tzinfo is None:
                raise InvalidOperation(f"{name} needs a time zone (e.g. 2026-01-01T00:00:00Z)")
        query = ConversationQuery(
            metadata=metadata,
            archived=archived,
            created_from=created_from,
            created_to=created_to,
            updated_from=updated_from,
            updated_to=updated_to,
            order=order,
            after=None if cursor is None else decode_conversation_cursor(cursor),
            limit=limit + 1,
        )
        found = await self.storage.list_conversations(self.tenant, query)
        items = found[:limit]
        next_cursor = encode_conversation_cursor(items[-1].cursor) if len(found) > limit else None
        return ConversationPage(items=tuple(i.conversation for i in items), next_cursor=next_cursor)

    @addressed
    async def delete(self, conversation_id: uuid.UUID) -> None:
        """Purge the conversation: its events, requests and views.

        One event without content remains, so feed readers learn of the
        deletion; the stream row stays as a tombstone so the id cannot be
        reused by mistake. This is what makes a GDPR erasure possible.
        """
        async with self.storage.writing(conversation_id, self.tenant) as session:
            stream = self._writable(conversation_id, session.stream, archived_too=True)
            await session.purge()
            await self._record(session, stream, [ConversationPurged()])

    # --- writes ----------------------------------------------------------------

    @addressed
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
            # Results for calls this append makes need no stored state.
            answered_call_ids=frozenset(m.tool_call_id for m in parsed if m.tool_call_id)
            - {c.id for m in parsed for c in m.tool_calls},
            client_ids=tuple(ids),
            idempotency_key=idempotency_key,
        )
        hash_ = request_hash(parsed) if idempotency_key is not None else ""
        try:
            return await self._append(
                conversation_id, parsed, lookups, expected_version, (idempotency_key, hash_), True
            )
        except StaleHead:
            # What the storage remembered was out of date; nothing was written.
            return await self._append(
                conversation_id, parsed, lookups, expected_version, (idempotency_key, hash_), False
            )

    async def _append(
        self,
        conversation_id: uuid.UUID,
        parsed: Sequence[Message],
        lookups: Lookups,
        expected_version: ExpectedVersion,
        idempotency: tuple[str | None, str],
        optimistic: bool,
    ) -> Appended:
        idempotency_key, hash_ = idempotency
        async with self.storage.writing(
            conversation_id, self.tenant, lookups=lookups, optimistic=optimistic
        ) as session:
            stream = self._writable(conversation_id, session.stream)
            # A retry is answered before the expected version is checked: the
            # first attempt already moved the version on.
            replay = await self._find_replay(session, parsed, idempotency_key, hash_)
            if replay is not None:
                return Appended(
                    conversation_id=current_key(),
                    version=stream.version,
                    messages=tuple(replay),
                    replayed=True,
                )
            try:
                check_expected(conversation_id, expected_version, stream.version)
            except ConcurrencyConflict:
                if session.remembered:  # the row may have moved on since: read it
                    raise StaleHead() from None
                raise
            events = await commands.append_messages(session, parsed, self.limits)
            request = (idempotency_key, hash_) if idempotency_key is not None else None
            recorded = await self._record(session, stream, events, request)
        # Built as the store's own value (`codec.trusted`): pydantic would
        # check each of the messages it just numbered again (194 µs for 100,
        # 3% of the client's time in a 100-message append).
        return trusted(
            Appended,
            {
                "conversation_id": current_key(),
                "version": stream.version + len(recorded),
                "messages": tuple(_stored(recorded, stream)),
                "replayed": False,
            },
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

    @addressed
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

    @addressed
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

    @addressed
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

    @addressed
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
            version=stream.version + len(recorded),
            batch=started.batch,
            visible=len(shown) + arrived,
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
        operation = _operation(
            StartBatch,
            agent_id=agent_id,
            boundary_seq=boundary_seq,
            summary=summary,
            retain=tuple(retain),
            adjust=adjust,
        )
        return await self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
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
        operation = _operation(
            Truncate,
            agent_id=agent_id,
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
        operation = _operation(
            Filter,
            agent_id=agent_id,
            roles=tuple(roles) if roles is not None else None,
            content_contains=tuple(content_contains) if content_contains else None,
            content_excludes=tuple(content_excludes) if content_excludes else None,
            adjust=adjust,
        )
        return await self.run_batch_operation(
            conversation_id, operation, expected_version=expected_version
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
        return await self.run_batch_operation(
            conversation_id,
            _operation(Clear, agent_id=agent_id, keep_system=keep_system, adjust=adjust),
            expected_version=expected_version,
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
        return await self.run_batch_operation(
            conversation_id,
            _operation(Insert, agent_id=agent_id, position=position, messages=parsed),
            expected_version=expected_version,
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
        return await self.run_batch_operation(
            conversation_id,
            _operation(RollbackToBatch, agent_id=agent_id, batch=batch),
            expected_version=expected_version,
        )

    # --- pins and forks ------------------------------------------------------------

    @addressed
    async def pin_message(
        self,
        conversation_id: uuid.UUID,
        seq: int,
        pinned: bool = True,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        """Pin (`pinned=False`: unpin) message `seq`: compaction keeps pinned
        messages in the new window (`StoredMessage.pinned`). Recorded as a
        `message_pinned` event; pinning a pinned message writes nothing.
        The conversation's version after it."""
        if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_INT:
            raise InvalidOperation(f"seq must be an integer 1..{MAX_INT}, got {seq!r}")
        if not isinstance(pinned, bool):
            raise InvalidOperation(f"pinned must be true or false, got {pinned!r}")
        async with self.storage.writing(conversation_id, self.tenant) as session:
            stream = self._writable(conversation_id, session.stream)
            check_expected(conversation_id, expected_version, stream.version)
            events = await commands.pin_message(session, seq, pinned)
            if not events:
                return stream.version
            recorded = await self._record(session, stream, events)
        return stream.version + len(recorded)

    @addressed
    async def fork(
        self,
        conversation_id: uuid.UUID,
        *,
        new_conversation_id: ConversationRef | None = None,
        up_to_seq: int | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Conversation:
        """A new conversation whose history is this one's messages up to
        `up_to_seq` (default: all), only `agent_id`'s if given, as they read
        now (edits applied, pins kept), with the agents' profiles and slots.

        The fork's log starts with a `conversation_forked` event naming the
        parent and the seq, and holds the copied messages as its own events
        (docs/storage.md, "Forks"): afterwards the two are independent —
        writes to either, and deleting the parent, leave the other as it
        is. Each agent's window is carried over: batch 1 holds every copy,
        and an agent whose window hid some of them (a compacted parent) gets
        a batch showing what the parent's did. Copied in one set-based
        write, in one transaction."""
        parent, parent_key = conversation_id, current_key()
        fork_key = (
            new_key() if new_conversation_id is None else conversation_key(new_conversation_id)
        )
        fork_id = stream_id(self.tenant, fork_key)
        if up_to_seq is not None and (
            isinstance(up_to_seq, bool)
            or not isinstance(up_to_seq, int)
            or not 1 <= up_to_seq <= MAX_INT
        ):
            raise InvalidOperation(f"up_to_seq must be an integer 1..{MAX_INT}, got {up_to_seq!r}")
        if agent_id is not None:
            problem = identifier_problem(agent_id, MAX_AGENT_ID_CHARS)
            if problem is not None:
                raise InvalidOperation(f"agent_id {problem}")
        problem = json_problem(metadata or {}, max_chars=MAX_METADATA_CHARS, what="metadata")
        if problem is not None:
            raise InvalidOperation(f"invalid metadata: {problem}")
        async with self.storage.writing(fork_id, self.tenant, create=fork_key) as session:
            stream = self._writable(fork_key, session.stream)
            check_expected(fork_key, StreamState.NO_STREAM, stream.version)
            source = await session.fork_source(parent, self.tenant, up_to_seq, agent_id)
            if agent_id is not None and source.messages == 0:
                raise InvalidOperation(
                    f"agent {agent_id!r} has no message up to seq {source.up_to_seq} to fork"
                )
            forked = ConversationForked(
                tenant=self.tenant,
                key=fork_key,
                parent=parent_key,
                parent_version=source.version,
                up_to_seq=source.up_to_seq,
                agent_id=agent_id,
                messages=source.messages,
                metadata=metadata or {},
            )
            write = _fork_write(forked, parent, source, stream)
            await session.write(write)
        return Conversation(
            id=fork_key,
            tenant=self.tenant,
            version=write.version or 1,
            current_batch=1,
            next_seq=write.changes.head.next_seq,
            archived=False,
            started_at=stream.now,
            metadata=forked.metadata,
            updated_at=stream.now,
        )

    # --- reads ---------------------------------------------------------------

    @addressed
    async def visible_window(
        self, conversation_id: uuid.UUID, *, batch: int | None = None, agent_id: str | None = None
    ) -> list[StoredMessage]:
        return await self.storage.window(
            conversation_id, self.tenant, batch=batch, agent_id=agent_id
        )

    @addressed
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

    @addressed
    async def role_range(
        self, conversation_id: uuid.UUID, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        role = _role(role)
        if first < 1 or last < first:
            raise InvalidOperation(f"role_range needs 1 <= first <= last, got {first}..{last}")
        if last - first + 1 > MAX_READ_LIMIT:
            raise InvalidOperation(f"role_range reads at most {MAX_READ_LIMIT} messages at once")
        return await self.storage.role_range(conversation_id, self.tenant, role, first, last)

    @addressed
    async def count_by_role(
        self, conversation_id: uuid.UUID, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        if scope == "history":
            return await self.storage.count_in_history(conversation_id, self.tenant)
        if scope != "visible":
            raise InvalidOperation(f"unknown scope {scope!r}; scopes are visible, history")
        return await self.storage.count_in_window(conversation_id, self.tenant)

    @addressed
    async def read_messages(
        self,
        conversation_id: uuid.UUID,
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
        """A keyset page of the whole history (or, `scope="visible"`, of the
        current window), by seq, optionally of one role, agent or kind:
        `order="desc", limit=N` is "the last N messages", O(N) at any
        history length."""
        page = self._history_page(after_seq, before_seq, limit, order, role, agent_id, kind, scope)
        return await self.storage.history(conversation_id, self.tenant, page)

    @addressed
    async def page_messages(
        self,
        conversation_id: uuid.UUID,
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
        """`read_messages`, with where the next page starts (null when this
        page is the last)."""
        page = self._history_page(after_seq, before_seq, limit, order, role, agent_id, kind, scope)
        found = await self.storage.history(
            conversation_id, self.tenant, replace(page, limit=limit + 1)
        )
        items = found[:limit]
        more = len(found) > limit
        last = items[-1].seq if more else None
        if order == "desc":
            return MessagePage(items=tuple(items), next_before_seq=last)
        return MessagePage(items=tuple(items), next_after_seq=last)

    @staticmethod
    def _history_page(
        after_seq: int | None,
        before_seq: int | None,
        limit: int,
        order: str,
        role: str | None,
        agent_id: str | None,
        kind: str | None,
        scope: str,
    ) -> HistoryPage:
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidOperation(f"limit must be 1..{MAX_READ_LIMIT}, got {limit}")
        if order not in ("asc", "desc"):
            raise InvalidOperation(f"order must be 'asc' or 'desc', got {order!r}")
        if scope not in ("visible", "history"):
            raise InvalidOperation(f"unknown scope {scope!r}; scopes are visible, history")
        if kind is not None and kind not in {k.value for k in MessageKind}:
            kinds = ", ".join(k.value for k in MessageKind)
            raise InvalidOperation(f"unknown kind {kind!r}; kinds are {kinds}")
        return HistoryPage(
            after_seq=after_seq,
            before_seq=before_seq,
            limit=limit,
            descending=order == "desc",
            role=None if role is None else _role(role),
            agent_id=agent_id,
            kind=kind,
            visible_only=scope == "visible",
        )

    @addressed
    async def read_window(
        self,
        conversation_id: uuid.UUID,
        *,
        batch: int | None = None,
        agent_id: str | None = None,
        cursor: str | None = None,
        limit: int = MAX_READ_LIMIT,
    ) -> WindowSlice:
        """A page of a batch's visible window (default: the current one), in
        window order; `cursor` is a page's `next_cursor`. (`visible_window`
        reads it whole, for the assembler.)"""
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidOperation(f"limit must be 1..{MAX_READ_LIMIT}, got {limit}")
        page = WindowPage(
            batch=batch,
            agent_id=agent_id,
            after_key=None if cursor is None else decode_window_cursor(cursor),
            limit=limit + 1,
        )
        found = await self.storage.window_page(conversation_id, self.tenant, page)
        items = found[:limit]
        next_cursor = encode_window_cursor(items[-1][0]) if len(found) > limit else None
        return WindowSlice(items=tuple(m for _, m in items), next_cursor=next_cursor)

    @addressed
    async def tool_blocks(
        self, conversation_id: uuid.UUID, *, pending_only: bool = False, agent_id: str | None = None
    ) -> list[ToolBlock]:
        return await self.storage.tool_blocks(
            conversation_id, self.tenant, pending_only=pending_only, agent_id=agent_id
        )

    @addressed
    async def batch_messages(self, conversation_id: uuid.UUID, batch: int) -> list[StoredMessage]:
        """The messages that arrived while batch `batch` was current."""
        return await self.storage.batch_messages(conversation_id, self.tenant, batch)

    @addressed
    async def batches(self, conversation_id: uuid.UUID) -> list[Batch]:
        return await self.storage.batches(conversation_id, self.tenant)

    @addressed
    async def context_slots(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> ContextSlots:
        _, slots = await self.storage.agent(conversation_id, self.tenant, agent_id)
        return slots

    @addressed
    async def agent_profile(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> AgentProfile:
        profile, _ = await self.storage.agent(conversation_id, self.tenant, agent_id)
        return profile

    async def search_messages(self, query: SearchQuery) -> SearchPage:
        """A page of this tenant's messages matching `query`, newest first
        (store.domain.search, docs/search.md): every batch's messages, visible or
        not; an edited message by its current content. A bad cursor is
        InvalidOperation; another tenant's conversation is never searched."""
        query.after()  # a cursor this API did not return is refused here
        return await self.storage.search_messages(self.tenant, query)

    @addressed
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
        from store.assembler import assemble_stored

        found = await self.storage.assembly_input(conversation_id, self.tenant, agent_id)
        with collector_paused():  # a payload of thousands of small dicts: see store.domain.codec
            return assemble_stored(
                found.window,
                profile=found.profile,
                slots=found.slots,
                format=format,
                options=options,
            )

    # --- export and the feed (store.domain.feed, store.repository.export) ---

    async def read_events(self, *, after: FeedPosition | None = None, limit: int = 100) -> FeedPage:
        """This tenant's events after the checkpoint `after` (None: from the
        start), in feed order; an event that commits late is never skipped."""
        feed.check_limit(limit)
        return await self.storage.tenant_feed(self.tenant, after or FeedPosition.start(), limit)

    async def feed_head(self) -> FeedPosition:
        """Where a reader that wants only events from now on starts."""
        return await self.storage.feed_head()

    async def tail(
        self,
        after: FeedPosition | None,
        *,
        heartbeat: float = feed.HEARTBEAT_SECONDS,
        limit: int = feed.MAX_FEED_LIMIT,
    ) -> AsyncIterator[FeedPage]:
        """The tenant's feed after `after` (None: from now on), page by page, forever.

        Yields each page with events as soon as it is read, and an empty page
        (`events == []`, with the checkpoint reached) once every `heartbeat`
        seconds without any.
        """
        position = after if after is not None else await self.feed_head()
        quiet_since = time.monotonic()
        while True:
            page = await self.read_events(after=position, limit=limit)
            position = feed.parse_checkpoint(page.next)
            if page.events or time.monotonic() - quiet_since >= heartbeat:
                quiet_since = time.monotonic()
                yield page
            if page.more:
                continue
            remaining = heartbeat - (time.monotonic() - quiet_since)
            await self.storage.wait_for_feed(max(remaining, 0.0))

    @addressed
    async def conversation_events(
        self, conversation_id: uuid.UUID, *, from_version: int = 1, limit: int = 100
    ) -> list[FeedEvent]:
        """The conversation's events from version `from_version` on, in order."""
        feed.check_limit(limit)
        if from_version < 1:
            raise InvalidOperation(f"from_version must be >= 1, got {from_version}")
        return await self.storage.conversation_events(
            conversation_id, self.tenant, from_version - 1, limit
        )

    async def changed_conversations(
        self, since: datetime, *, after: uuid.UUID | None = None, limit: int = 100
    ) -> list[ChangedConversation]:
        """This tenant's conversations changed at or after `since`, by id."""
        feed.check_limit(limit)
        return await self.storage.changed_conversations(self.tenant, since, after, limit)


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


def _fork_write(
    forked: ConversationForked, parent: uuid.UUID, source: ForkSource, stream: StreamRow
) -> Write:
    """A fork's write: `forked` at version 1; the copied messages (and their
    pins) from version 2, written by the storage from the parent's rows (a
    `CopyForked` step, set-based); then the agents' profiles and slots, and
    a batch per agent whose window hid some of what was copied."""
    copied = source.messages + source.pinned
    context: list[DomainEvent] = [AgentConfigured(profile=p) for p in source.profiles]
    for agent, slot, value in source.slots:
        if slot == TODO:
            items = tuple(TodoItem.model_validate(i) for i in value)
            context.append(ContextSlotUpdated(agent_id=agent, slot=slot, todo=items))
        else:
            context.append(ContextSlotUpdated(agent_id=agent, slot=slot, text=value))
    # Each agent's window as the parent showed it (a compacted one stays
    # compacted), as the fork's own batch over the copies in batch 1.
    context += [
        BatchStarted(
            batch=2 + i,
            boundary=window.boundary,
            retained=window.retained,
            operation="fork",
            parameters={"parent_batch": window.parent_batch},
            agent_id=window.agent_id,
            source=1,
        )
        for i, window in enumerate(source.windows)
    ]
    first = Recorded(version=1, recorded_at=stream.now, event=forked)
    later = [
        Recorded(version=2 + copied + i, recorded_at=stream.now, event=event)
        for i, event in enumerate(context)
    ]
    started = project(stream.head, [first])
    # What the projector would count replaying the copied events.
    after_copy = replace(
        started.head, next_seq=source.last_seq + 1, role_counts=dict(source.role_counts)
    )
    rest = project(after_copy, later)
    copy = CopyForked(
        parent=parent,
        up_to_seq=source.up_to_seq,
        agent_id=forked.agent_id,
        first_version=2,
        messages=source.messages,
    )
    return Write(
        events=tuple(
            EventToWrite(version=r.version, type=r.event.type, data=r.event.data())
            for r in (first, *later)
        ),
        changes=Changes(steps=(*started.steps, copy, *rest.steps), head=rest.head),
        version=1 + copied + len(context),
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
