"""An in-memory storage, shipped for users' own tests: no database, the
same repository.

    from store.memory import InMemoryRepository

    async def test_agent_keeps_the_question() -> None:
        repository = InMemoryRepository()
        conversation = await repository.create_conversation()
        await repository.append_messages(
            conversation.id, [{"role": "user", "content": "What is 2 + 2?"}]
        )
        window = await repository.visible_window(conversation.id)
        assert [(m.seq, m.role) for m in window] == [(1, "user")]

`MemoryStorage` implements the storage port (`store.repository.port`) over dicts
that mirror the PostgreSQL tables, one short method per named operation;
everything above the port — the repository's orchestration, the commands'
decisions, the projector — is the same code that runs on PostgreSQL. The
contract suite in tests/contract runs against both.

Writers are serialised per conversation by an `asyncio.Lock`, as the
stream row lock serialises them in PostgreSQL, so concurrent tasks get the
same `ConcurrencyConflict`s. A write applies nothing until `write()`, and
checks everything that could refuse before it changes anything: a refused
write leaves no trace, as a rolled-back transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from decimal import Decimal

from store.domain.codec import StoredWindow, message_text
from store.domain.commands import Limits
from store.domain.context import AgentProfile, ContextSlots, default_profile, slots_from_values
from store.domain.errors import ConversationDeleted, ConversationNotFound
from store.domain.feed import ChangedConversation, FeedEvent, FeedPage, checkpoint, scan_limit
from store.domain.listing import ConversationCursor, ConversationQuery, Listed, json_contains
from store.domain.messages import MAIN_AGENT, ROLES, Role, StoredMessage
from store.domain.projector import (
    ViewHead,
)
from store.domain.records import FeedPosition, RecordedEvent
from store.domain.search import Candidate, SearchPage, SearchQuery, search_candidates
from store.domain.values import Batch, Conversation, ToolBlock
from store.memory.tables import (
    EventRecord,
    StreamRecord,
    Tables,
    event_record,
    stored_message,
)
from store.memory.write_session import MemoryRebuildSession, MemoryWriteSession
from store.repository import DEFAULT_TENANT, Repository
from store.repository.port import (
    NO_LOOKUPS,
    AssemblyInput,
    CandidateCursor,
    CandidateQuery,
    CompactionCandidate,
    HistoryPage,
    Lookups,
    StreamRow,
    WindowPage,
)

__all__ = ["InMemoryRepository", "MemoryStorage"]


def _feed_event(key: str, event: RecordedEvent | EventRecord) -> FeedEvent:
    return FeedEvent(
        checkpoint=f"{event.transaction_id}-{event.position}",
        conversation_id=key,
        version=event.version,
        type=event.type,
        recorded_at=event.recorded_at,
        data=event.data,
    )


# --- the storage ------------------------------------------------------------------


class MemoryStorage:
    """`store.repository.port.Storage` over dicts."""

    def __init__(self) -> None:
        self._tables = Tables()
        self._locks: dict[uuid.UUID, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._claims: set[str] = set()  # try_claim's names held in this process
        self._stale_heads = 0

    def report_stale_heads(self, n: int) -> None:
        """Make the next `n` optimistic writes (`writing(..., optimistic=True)`)
        find the row they were decided on moved on, as PostgreSQL's do when
        another process wrote the conversation between: each writes nothing
        and raises `StaleHead`, so the repository decides again under the
        lock, here as there."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self._stale_heads = n

    def _head(self, cid: uuid.UUID, row: StreamRecord) -> ViewHead:
        index = self._tables.views[cid].role_index if cid in self._tables.views else {}
        return ViewHead(
            next_seq=row.next_seq,
            current_batch=row.current_batch,
            role_counts={role: len(index.get(role, ())) for role in ROLES},
            agent_batches=dict(row.agent_batches),
        )

    @asynccontextmanager
    async def writing(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        *,
        create: str | None = None,
        lookups: Lookups = NO_LOOKUPS,
        optimistic: bool = False,
    ) -> AsyncIterator[MemoryWriteSession]:
        # Nothing to gain from optimism in memory: the row is always read,
        # but a stale head can be asked for (`report_stale_heads`).
        stale = optimistic and create is None and self._stale_heads > 0
        if stale:
            self._stale_heads -= 1
        async with self._locks[conversation_id]:
            now = datetime.now(UTC)
            row = self._tables.streams.get(conversation_id)
            if row is None and create is not None:
                row = StreamRecord(tenant=tenant, key=create, created_at=now, updated_at=now)
            stream = (
                None
                if row is None
                else StreamRow(
                    tenant=row.tenant,
                    version=row.version,
                    deleted=row.deleted_at is not None,
                    archived=row.archived_at is not None,
                    head=self._head(conversation_id, row),
                    now=now,
                )
            )
            session = MemoryWriteSession(self._tables, conversation_id, stream, stale=stale)
            if row is not None and conversation_id not in self._tables.streams:
                # Created here: kept only if the write goes through, as the
                # INSERT of the stream row commits only with the transaction.
                self._tables.streams[conversation_id] = row
                try:
                    yield session
                except BaseException:
                    if row.version == 0:
                        del self._tables.streams[conversation_id]
                    raise
                return
            yield session

    # --- reads -------------------------------------------------------------------

    def _readable(self, cid: uuid.UUID, tenant: str) -> StreamRecord:
        row = self._tables.streams.get(cid)
        if row is None or row.tenant != tenant or row.version == 0:
            raise ConversationNotFound(cid)
        if row.deleted_at is not None:
            raise ConversationDeleted(cid)
        return row

    def _messages(self, cid: uuid.UUID, seqs: Iterable[int]) -> list[StoredMessage]:
        return [stored_message(self._tables, cid, s) for s in seqs]

    async def conversation(self, conversation_id: uuid.UUID, tenant: str) -> Conversation:
        row = self._readable(conversation_id, tenant)
        return Conversation(
            id=row.key,
            tenant=row.tenant,
            version=row.version,
            current_batch=row.batch_of(MAIN_AGENT),
            next_seq=row.next_seq,
            archived=row.archived_at is not None,
            started_at=row.created_at,
            metadata=row.metadata,
            updated_at=row.updated_at,
        )

    def _window_members(
        self,
        cid: uuid.UUID,
        row: StreamRecord,
        batch: int | None = None,
        agent_id: str | None = None,
        role: str | None = None,
    ) -> list[tuple[Decimal, int]]:
        """Batch `batch`'s window (of `agent_id`'s messages, if given), else
        `agent_id`'s current window, else every agent's current window:
        (sort key, seq) in window order."""
        views = self._tables.views[cid]
        messages = views.messages
        if batch is None and agent_id is None:
            numbers = {row.current_batch, *row.agent_batches.values()}
            found = sorted(
                (key, seq)
                for number in numbers
                for key, seq in views.members.get(number, ())
                if row.batch_of(messages[seq].agent_id) == number
            )
        else:
            number = row.batch_of(agent_id or "") if batch is None else batch
            found = [
                (key, seq)
                for key, seq in views.members.get(number, ())
                if agent_id is None or messages[seq].agent_id == agent_id
            ]
        return [(k, s) for k, s in found if role is None or messages[s].role == role]

    def _window_seqs(
        self,
        cid: uuid.UUID,
        row: StreamRecord,
        batch: int | None = None,
        agent_id: str | None = None,
        role: str | None = None,
    ) -> list[int]:
        return [seq for _, seq in self._window_members(cid, row, batch, agent_id, role)]

    async def window(
        self, conversation_id: uuid.UUID, tenant: str, *, batch: int | None, agent_id: str | None
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        return self._messages(
            conversation_id, self._window_seqs(conversation_id, row, batch, agent_id)
        )

    async def recent_in_window(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        seqs = self._window_seqs(conversation_id, row, None, agent_id, role)
        return self._messages(conversation_id, seqs[max(len(seqs) - n, 0) :] if n else [])

    async def recent_in_history(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        seqs = [
            s
            for s in views.role_index[role]
            if agent_id is None or views.messages[s].agent_id == agent_id
        ]
        return self._messages(conversation_id, seqs[max(len(seqs) - n, 0) :] if n else [])

    async def role_range(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        seqs = self._tables.views[conversation_id].role_index[role][first - 1 : last]
        return self._messages(conversation_id, seqs)

    async def count_in_window(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        row = self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        roles = [views.messages[s].role for s in self._window_seqs(conversation_id, row)]
        return {role: roles.count(role) for role in ROLES}

    async def count_in_history(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        self._readable(conversation_id, tenant)
        index = self._tables.views[conversation_id].role_index
        return {role: len(index[role]) for role in ROLES}

    async def history(
        self, conversation_id: uuid.UUID, tenant: str, page: HistoryPage
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        visible = set(self._window_seqs(conversation_id, row)) if page.visible_only else None
        seqs = sorted(
            s
            for s, m in views.messages.items()
            if (page.after_seq is None or s > page.after_seq)
            and (page.before_seq is None or s < page.before_seq)
            and (page.role is None or m.role == page.role)
            and (page.agent_id is None or m.agent_id == page.agent_id)
            and (page.kind is None or m.kind == page.kind)
            and (visible is None or s in visible)
        )
        if page.descending:
            seqs.reverse()
        return self._messages(conversation_id, seqs[: page.limit])

    async def window_page(
        self, conversation_id: uuid.UUID, tenant: str, page: WindowPage
    ) -> list[tuple[Decimal, StoredMessage]]:
        row = self._readable(conversation_id, tenant)
        found = [
            (key, seq)
            for key, seq in self._window_members(conversation_id, row, page.batch, page.agent_id)
            if page.after_key is None or key > page.after_key
        ][: page.limit]
        return [(key, stored_message(self._tables, conversation_id, seq)) for key, seq in found]

    async def list_conversations(self, tenant: str, query: ConversationQuery) -> list[Listed]:
        def wanted(row: StreamRecord) -> bool:
            return (
                row.tenant == tenant
                and row.version > 0
                and row.deleted_at is None
                and (query.metadata is None or json_contains(row.metadata, query.metadata))
                and (query.archived is None or (row.archived_at is not None) == query.archived)
                and (query.created_from is None or row.created_at >= query.created_from)
                and (query.created_to is None or row.created_at < query.created_to)
                and (query.updated_from is None or row.updated_at >= query.updated_from)
                and (query.updated_to is None or row.updated_at < query.updated_to)
            )

        newest = query.order == "newest"
        found = sorted(
            ((row.created_at, cid) for cid, row in self._tables.streams.items() if wanted(row)),
            reverse=newest,
        )
        if query.after is not None:
            after = (query.after.created_at, query.after.id)
            found = [k for k in found if (k < after if newest else k > after)]
        return [
            Listed(
                conversation=await self.conversation(cid, tenant),
                cursor=ConversationCursor(created_at=created_at, id=cid),
            )
            for created_at, cid in found[: query.limit]
        ]

    async def tool_blocks(
        self, conversation_id: uuid.UUID, tenant: str, *, pending_only: bool, agent_id: str | None
    ) -> list[ToolBlock]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        blocks = []
        for call_id, call in sorted(
            views.calls.items(), key=lambda item: (item[1].assistant_seq, item[0])
        ):
            if pending_only and call.result_seq is not None:
                continue
            if agent_id is not None and call.agent_id != agent_id:
                continue
            body = event_record(
                self._tables, conversation_id, views.messages[call.assistant_seq].event_version
            ).data["message"]
            arguments = next(
                c.get("arguments", {}) for c in body["tool_calls"] if c["id"] == call_id
            )
            blocks.append(
                ToolBlock(
                    call_id=call_id,
                    tool_name=call.tool_name,
                    arguments=arguments,
                    agent_id=call.agent_id,
                    assistant_seq=call.assistant_seq,
                    result_seq=call.result_seq,
                    status="pending" if call.result_seq is None else "complete",
                    is_error=call.is_error,
                )
            )
        return blocks

    async def batch_messages(
        self, conversation_id: uuid.UUID, tenant: str, batch: int
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        messages = self._tables.views[conversation_id].messages
        return self._messages(
            conversation_id, sorted(s for s, row in messages.items() if row.batch == batch)
        )

    async def batches(self, conversation_id: uuid.UUID, tenant: str) -> list[Batch]:
        self._readable(conversation_id, tenant)
        batches = self._tables.views[conversation_id].batches
        return [batches[n] for n in sorted(batches)]

    async def agent(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> tuple[AgentProfile, ContextSlots]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        return (
            views.profiles.get(agent_id) or default_profile(agent_id),
            slots_from_values(views.slots.get(agent_id, {})),
        )

    async def assembly_input(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> AssemblyInput:
        row = self._readable(conversation_id, tenant)
        profile, slots = await self.agent(conversation_id, tenant, agent_id)
        seqs = self._window_seqs(conversation_id, row, None, agent_id)
        views = self._tables.views[conversation_id]
        rows = []  # as the PostgreSQL storage reads them: each event's JSON
        for seq in seqs:
            body = event_record(
                self._tables, conversation_id, views.messages[seq].event_version
            ).data
            edit = views.edits.get(seq)
            rows.append(
                (body, event_record(self._tables, conversation_id, edit).data if edit else None)
            )
        return AssemblyInput(window=StoredWindow(rows), profile=profile, slots=slots)

    async def search_messages(self, tenant: str, query: SearchQuery) -> SearchPage:
        """A scan of the tenant's messages (store.domain.search: the same filters,
        whole-word matching for text mode)."""

        def candidates() -> Iterator[Candidate]:
            for cid, stream in self._tables.streams.items():
                if stream.tenant != tenant or stream.deleted_at is not None:
                    continue
                views = self._tables.views[cid]
                names: dict[int, set[str]] = defaultdict(set)
                for call in views.calls.values():
                    names[call.assistant_seq].add(call.tool_name)
                    if call.result_seq is not None:
                        names[call.result_seq].add(call.tool_name)
                for seq, row in views.messages.items():
                    event = event_record(self._tables, cid, row.event_version)
                    edit = views.edits.get(seq)
                    content = (
                        event_record(self._tables, cid, edit).data["content"] if edit else None
                    )
                    yield Candidate(
                        conversation=cid,
                        shown_id=stream.key,
                        metadata=stream.metadata,
                        seq=seq,
                        role=row.role,  # type: ignore[arg-type]
                        agent_id=row.agent_id,
                        kind=row.kind,
                        batch=row.batch,
                        recorded_at=event.recorded_at,
                        edited=edit is not None,
                        text=message_text(event.data["message"], content),
                        tool_names=frozenset(names.get(seq, ())),
                    )

        return search_candidates(query, candidates())

    # --- the log -------------------------------------------------------------------

    async def read_feed(self, after: FeedPosition, limit: int) -> list[RecordedEvent]:
        # Every write here is finished when it returns: nothing is in flight.
        events = sorted(
            (
                RecordedEvent(
                    position=e.position,
                    conversation_id=cid,
                    version=e.version,
                    type=e.type,
                    data=e.data,
                    recorded_at=e.recorded_at,
                    transaction_id=e.transaction_id,
                )
                for cid, rows in self._tables.events.items()
                for e in rows
            ),
            key=lambda e: (e.transaction_id, e.position),
        )
        start = (after.transaction_id, after.position)
        return [e for e in events if (e.transaction_id, e.position) > start][:limit]

    async def feed_head(self) -> FeedPosition:
        last = await self.read_feed(FeedPosition.start(), limit=10**12)
        return last[-1].feed_position if last else FeedPosition.start()

    async def conversation_ids(self) -> list[uuid.UUID]:
        return sorted(self._tables.streams)

    async def compaction_candidates(
        self, tenant: str, query: CandidateQuery
    ) -> list[CompactionCandidate]:
        found: list[CompactionCandidate] = []
        rows = sorted(
            (row.created_at, cid, row)
            for cid, row in self._tables.streams.items()
            if row.tenant == tenant
            and row.version > 0
            and row.deleted_at is None
            and row.archived_at is None
        )
        for created_at, cid, row in rows:
            if query.after is not None and (created_at, cid) <= (
                query.after.created_at,
                query.after.stream,
            ):
                continue
            views = self._tables.views[cid]
            batch = row.batch_of(query.agent_id)
            shown = [
                views.messages[seq]
                for _, seq in views.members.get(batch, ())
                if views.messages[seq].agent_id == query.agent_id
            ]
            messages, tokens = len(shown), sum(m.token_estimate for m in shown)
            if (query.max_messages is not None and messages > query.max_messages) or (
                query.max_tokens is not None and tokens > query.max_tokens
            ):
                found.append(
                    CompactionCandidate(
                        conversation_id=row.key,
                        version=row.version,
                        messages=messages,
                        tokens=tokens,
                        cursor=CandidateCursor(created_at=created_at, stream=cid),
                    )
                )
                if len(found) == query.limit:
                    break
        return found

    @asynccontextmanager
    async def try_claim(self, name: str) -> AsyncIterator[bool]:
        if name in self._claims:
            yield False
            return
        self._claims.add(name)
        try:
            yield True
        finally:
            self._claims.discard(name)

    async def count_events(self, conversation_id: uuid.UUID | None = None) -> int:
        events = self._tables.events
        if conversation_id is not None:
            return len(events.get(conversation_id, ()))
        return sum(len(rows) for rows in events.values())

    # --- export and the tenant feed (store.domain.feed, store.repository.export) ---

    async def tenant_feed(self, tenant: str, after: FeedPosition, limit: int) -> FeedPage:
        # As on PostgreSQL: at most `scan_limit` events of the global feed
        # scanned, the page ends at the last one within it.
        scan = scan_limit(limit)
        scanned = await self.read_feed(after, scan)
        streams = self._tables.streams
        events: list[FeedEvent] = []
        last = after
        for e in scanned:
            if len(events) == limit and streams[e.conversation_id].tenant == tenant:
                break
            last = e.feed_position
            if streams[e.conversation_id].tenant == tenant:
                events.append(_feed_event(streams[e.conversation_id].key, e))
        return FeedPage(
            events=events, next=checkpoint(last), more=len(scanned) >= scan or len(events) >= limit
        )

    async def conversation_events(
        self, conversation_id: uuid.UUID, tenant: str, after_version: int, limit: int
    ) -> list[FeedEvent]:
        key = self._readable(conversation_id, tenant).key
        rows = [e for e in self._tables.events[conversation_id] if e.version > after_version]
        return [_feed_event(key, e) for e in rows[:limit]]

    async def changed_conversations(
        self, tenant: str, since: datetime, after: uuid.UUID | None, limit: int
    ) -> list[ChangedConversation]:
        found = [
            ChangedConversation(id=cid, key=row.key, updated_at=row.updated_at)
            for cid, row in sorted(self._tables.streams.items())
            if row.tenant == tenant
            and row.deleted_at is None
            and row.version > 0
            and row.updated_at >= since
            and (after is None or cid > after)
        ]
        return found[:limit]

    async def wait_for_feed(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        moved = self._tables.feed_moved
        async with moved:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait(), timeout)

    @asynccontextmanager
    async def rebuilding(self, conversation_id: uuid.UUID) -> AsyncIterator[MemoryRebuildSession]:
        async with self._locks[conversation_id]:
            self._tables.views.pop(conversation_id, None)
            stream = self._tables.streams[conversation_id]
            stream.next_seq, stream.current_batch, stream.archived_at = 1, 1, None
            stream.agent_batches = {}
            yield MemoryRebuildSession(self._tables, conversation_id)

    async def ping(self) -> None:
        return None

    async def feed_lag(self) -> float:
        return 0.0  # every write here is finished when it returns

    async def close(self) -> None:
        return None


def InMemoryRepository(  # noqa: N802 - reads as the class it stood for
    *, tenant: str = DEFAULT_TENANT, limits: Limits | None = None
) -> Repository:
    """A `Repository` over a fresh `MemoryStorage`; `for_tenant` shares it."""
    return Repository(MemoryStorage(), tenant=tenant, limits=limits)
