"""The storage port: the named operations a backend must provide.

`store.repository.Repository` is written once, over this port. A backend
is PostgreSQL (`store.postgres.PostgresStorage`: each operation a named
statement) or memory (`store.memory.MemoryStorage`: each operation a few
lines over dicts). Nothing above this port knows which one it runs on; the
contract suite in tests/contract runs against both.

A write happens inside `Storage.writing(...)`: a transaction that holds the
conversation's stream lock, so decisions made on what it reads stay true
until it commits. Lookups the write will need (the calls its tool messages
answer, its client ids, its idempotency key) are named up front, so a
backend can fetch them together with the lock (PostgreSQL: one round trip).
The write ends with `WriteSession.write(...)`: the events, the projection
changes `store.domain.projector` derived from them, and the request
to remember — all committed together or not at all.

Reads take the tenant and raise `ConversationNotFound` (also for another
tenant's conversation) or `ConversationDeleted`.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from store.domain.codec import StoredWindow
from store.domain.commands import ConversationState, Head
from store.domain.context import AgentProfile, ContextSlots
from store.domain.errors import InvalidOperation
from store.domain.feed import ChangedConversation, FeedEvent, FeedPage
from store.domain.feed_vector import FeedVector
from store.domain.listing import ConversationQuery, Listed
from store.domain.messages import Role, StoredMessage
from store.domain.projector import Changes, Recorded, ViewHead
from store.domain.records import FeedPosition, RecordedEvent
from store.domain.search import SearchPage, SearchQuery
from store.domain.values import Batch, Conversation, ToolBlock
from store.domain.window import WindowEntry

if TYPE_CHECKING:
    from store.assembler.prefix_cache import PrefixCache


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
    # Of `call_ids`, the calls made before the write that its tool results
    # answer: their state must be known, where a new call's id need only be
    # unused.
    answered_call_ids: frozenset[str] = frozenset()
    client_ids: tuple[str, ...] = ()
    idempotency_key: str | None = None


NO_LOOKUPS = Lookups()


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """How a write opens its transaction (`Storage.writing`).

    `create`: the conversation's id as its creator chose it, to create it
    (at version 0) if missing. `lookups`: what the write will ask for under
    the lock. `optimistic`: the write only appends messages and, on
    `StaleHead`, is decided again without optimism."""

    create: str | None = None
    lookups: Lookups = NO_LOOKUPS
    optimistic: bool = False


PLAIN_WRITE = WriteOptions()


@dataclass(frozen=True, kw_only=True)
class StoredRequest:
    """What an idempotency key wrote: the hash of the request, its events."""

    request_hash: str
    first_version: int
    last_version: int


@dataclass(frozen=True, kw_only=True)
class ForkWindow:
    """An agent's window as the fork carries it over (docs/storage.md,
    "Forks"): of its copied messages, those the parent's window showed —
    the ones from sort key `boundary` on and the `retained` ones before it —
    as the window of batch `parent_batch` read at the fork point."""

    agent_id: str
    parent_batch: int
    boundary: Decimal
    retained: tuple[int, ...]


def fork_windows(rows: Sequence[tuple[str, int, Decimal, int, bool]]) -> tuple[ForkWindow, ...]:
    """The windows a fork carries over, from each copied message's (agent,
    seq, sort key, the batch of its agent's window at the fork point,
    whether that window shows it): one per agent whose window hid some of
    its copied messages (an agent whose window shows them all keeps the
    fork's first batch, which shows everything). Shown messages are a tail
    by sort key plus retained seqs before it, so a window compacted long
    ago is a short list, not every seq since."""
    by_agent: dict[str, list[tuple[Decimal, int, int, bool]]] = {}
    for agent, seq, key, batch, shown in rows:
        by_agent.setdefault(agent, []).append((Decimal(key), seq, batch, shown))
    windows = []
    for agent in sorted(by_agent):
        messages = sorted(by_agent[agent])
        if all(shown for *_, shown in messages):
            continue
        tail = len(messages)
        while tail > 0 and messages[tail - 1][3]:
            tail -= 1
        # Everything appended to the fork later has a greater sort key.
        if tail < len(messages):
            boundary = messages[tail][0]
        else:  # past every copied key (an inserted message's key is below its seq)
            boundary = Decimal(max(seq for _, seq, _, _ in messages) + 1)
        retained = tuple(sorted(seq for _, seq, _, shown in messages[:tail] if shown))
        windows.append(
            ForkWindow(
                agent_id=agent,
                parent_batch=messages[0][2],
                boundary=boundary,
                retained=retained,
            )
        )
    return tuple(windows)


@dataclass(frozen=True, kw_only=True)
class ForkSource:
    """What a fork copies from its parent, read in the fork's transaction
    with the parent's stream row share-locked (no write to the parent
    until the fork commits): its version, and of the messages up to
    `up_to_seq` (of one agent, if asked) how many, the highest seq, each
    role's count and how many are pinned; its agents' profiles and slots;
    the agents' windows to carry over (`fork_windows`)."""

    version: int
    up_to_seq: int
    messages: int
    last_seq: int
    pinned: int
    role_counts: dict[str, int]
    profiles: tuple[AgentProfile, ...]
    slots: tuple[tuple[str, str, Any], ...]  # (agent, slot, value as stored)
    windows: tuple[ForkWindow, ...] = ()


@dataclass(kw_only=True)  # not frozen: built per message (store.domain.projector)
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
    # The stream's version after the write, when its last event is not the
    # last one written (a fork's copied events are written by a step).
    version: int | None = None


class StaleHead(Exception):
    """An optimistic write (`Storage.writing` with `WriteOptions(optimistic=True)`) wrote
    nothing: the stream row its storage remembered was no longer the
    conversation's, or the memory could not answer what the decision asked.
    The caller decides again in a write that reads the row under its lock."""


class WriteSession(ConversationState, Protocol):
    """A transaction holding one conversation's stream lock.

    `stream` is None when the conversation does not exist (and the write
    did not ask to create it). As a `ConversationState` it answers the
    decisions in `store.domain.commands`.

    `remembered`: `stream` is what the storage remembers of the row from
    its last write, not yet read under the lock (an optimistic write). A
    refusal the row alone would justify (an expected version that differs)
    is then not made: the caller raises `StaleHead` and decides again.
    """

    remembered: bool

    @property
    def stream(self) -> StreamRow | None: ...

    async def metadata(self) -> dict[str, Any]:
        """The conversation's metadata as this transaction sees it."""
        ...

    async def request(self, idempotency_key: str) -> StoredRequest | None: ...
    async def messages_by_client_id(
        self, client_ids: Sequence[str]
    ) -> dict[str, StoredMessage]: ...
    async def messages_written_by(
        self, first_version: int, last_version: int
    ) -> list[StoredMessage]:
        """The messages appended by the events in [first_version, last_version]."""
        ...

    async def fork_source(
        self, parent: uuid.UUID, tenant: str, up_to_seq: int | None, agent_id: str | None
    ) -> ForkSource:
        """Share-lock `parent` (tenant's, not deleted: else ConversationNotFound /
        ConversationDeleted naming it) and read what forking it copies;
        `up_to_seq` None: up to its last message."""
        ...

    async def write(self, write: Write) -> datetime | None:
        """Write `write` (queued with the commit, or sent at once). Returns
        the time its events were recorded when the storage learned it only
        as it wrote (an optimistic write); None: it is `stream.now`."""
        ...

    async def purge(self) -> None:
        """Delete the conversation's events, requests and views (the stream
        row stays, as a tombstone)."""
        ...


class CurrentWindow(ABC):
    """A write session's `window`: an agent's current window, as the batch
    the head names for it shows it (what every backend's session does)."""

    @abstractmethod
    async def head(self) -> Head: ...

    @abstractmethod
    async def batch_window(
        self, batch: int, agent_id: str | None = None
    ) -> list[WindowEntry] | None: ...

    async def window(self, agent_id: str) -> list[WindowEntry]:
        window = await self.batch_window((await self.head()).batch_of(agent_id), agent_id)
        assert window is not None  # the batch the head names is the agent's
        return window


class RebuildSession(Protocol):
    """A transaction holding one conversation's stream lock, whose views
    were emptied: replay its events through the projector into them."""

    async def events(self, after_version: int, limit: int) -> list[Recorded]: ...
    async def apply(self, changes: Changes) -> None: ...


@dataclass(frozen=True, kw_only=True)
class RestoredEvent:
    """An event put back from cold storage as it was recorded (store.repository.retention)."""

    version: int
    type: str
    data: dict[str, Any]
    recorded_at: datetime


class RestoreSession(RebuildSession, Protocol):
    """A conversation being put back, in one transaction holding its stream
    lock: its events are inserted as they were recorded, in version order
    from 1, then replayed through the projector like a rebuild's."""

    async def insert(self, events: Sequence[RestoredEvent]) -> None: ...


def check_restored_order(version: int, events: Sequence[RestoredEvent]) -> None:
    """`InvalidOperation` unless `events` are the versions after `version`, in order."""
    for expected, event in enumerate(events, start=version + 1):
        if event.version != expected:
            raise InvalidOperation(
                f"restored events must be versions 1, 2, … in order:"
                f" expected {expected}, got {event.version}"
            )


@dataclass(frozen=True, kw_only=True)
class AssemblyInput:
    """What a payload build reads, in one go: the agent's visible window
    (as stored: `StoredWindow.messages` decodes it), its profile and its
    context slots; and the storage's `PrefixCache`, whose kept hashes the
    window's rows can be checked against (one per storage: see
    `store.assembler.prefix_cache`)."""

    window: StoredWindow
    profile: AgentProfile
    slots: ContextSlots
    prefixes: PrefixCache | None = None


@dataclass(frozen=True, kw_only=True)
class HistoryPage:
    """A keyset page of a conversation's messages, by seq: its whole
    history, or (`visible_only`) the current batch's window; optionally
    only one role, agent or kind."""

    after_seq: int | None = None
    before_seq: int | None = None
    limit: int = 100
    descending: bool = False
    role: Role | None = None
    agent_id: str | None = None
    kind: str | None = None
    visible_only: bool = False


@dataclass(frozen=True, kw_only=True)
class WindowPage:
    """A keyset page of a batch's window (None: the current one), in window
    order: the messages whose sort key is past `after_key`."""

    batch: int | None = None
    agent_id: str | None = None
    after_key: Decimal | None = None
    limit: int = 1000


DEFAULT_CANDIDATE_PAGE = 500


@dataclass(frozen=True, kw_only=True)
class CandidateCursor:
    """Where a page of candidates ended: the last one's creation time and stream id."""

    created_at: datetime
    stream: uuid.UUID


@dataclass(frozen=True, kw_only=True)
class CandidateQuery:
    """A page of a tenant's writable conversations whose `agent_id` window
    holds more than `max_messages` messages or `max_tokens` tokens."""

    agent_id: str
    max_messages: int | None
    max_tokens: int | None
    after: CandidateCursor | None = None
    limit: int = DEFAULT_CANDIDATE_PAGE


@dataclass(frozen=True, kw_only=True)
class CompactionCandidate:
    """A conversation over a threshold, as the page found it."""

    conversation_id: str  # the id callers use
    version: int
    messages: int  # in the agent's current window
    tokens: int
    cursor: CandidateCursor


class Storage(Protocol):
    # --- writes ------------------------------------------------------------
    def writing(
        self, conversation_id: uuid.UUID, tenant: str, options: WriteOptions = PLAIN_WRITE
    ) -> AbstractAsyncContextManager[WriteSession]:
        """A write transaction on the conversation's locked stream row;
        with `create` (the conversation's id as its creator chose it), a
        missing conversation is created at version 0 for `tenant` first.

        `optimistic`: the caller only appends messages, and on `StaleHead`
        decides again with `optimistic=False`. A storage may then answer the
        decision from what it remembers of the conversation since its last
        write there, and send the lock, the write and the commit together:
        the write takes effect only if no other write came between, else
        nothing is written and `StaleHead` is raised (docs/storage.md,
        "Appends in one round trip")."""
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
    async def window_page(
        self, conversation_id: uuid.UUID, tenant: str, page: WindowPage
    ) -> list[tuple[Decimal, StoredMessage]]:
        """The page's messages, each with its sort key (the next page's cursor)."""
        ...

    async def list_conversations(self, tenant: str, query: ConversationQuery) -> list[Listed]:
        """The tenant's conversations that are not deleted, as `query` says,
        in its order after its cursor: at most `query.limit + 1` (the one
        more tells the repository another page follows)."""
        ...

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

    async def search_messages(self, tenant: str, query: SearchQuery) -> SearchPage:
        """A page of `tenant`'s messages matching `query` (store.domain.search),
        newest first. Never another tenant's messages."""
        ...

    # --- the log -------------------------------------------------------------
    async def read_feed(self, after: FeedPosition, limit: int) -> list[RecordedEvent]:
        """The next events of this storage's own partition after `after`."""
        ...

    # The partitions of the feed this storage reads (store.domain.feed_vector):
    # a position naming another one is refused.
    feed_partitions: tuple[str, ...]

    async def feed_head(self) -> FeedVector:
        """Where a reader that wants only events from now on starts."""
        ...

    async def conversation_ids(self) -> list[uuid.UUID]: ...
    async def count_events(self, conversation_id: uuid.UUID | None = None) -> int: ...
    def rebuilding(
        self, conversation_id: uuid.UUID
    ) -> AbstractAsyncContextManager[RebuildSession]: ...
    def restoring(
        self, conversation_id: uuid.UUID, tenant: str, key: str
    ) -> AbstractAsyncContextManager[RestoreSession]:
        """Put a conversation back, all or nothing: its stream row made anew
        (replacing the tombstone its deletion left, whose last event goes;
        `ConversationExists` if it is live), then `RestoreSession`'s inserts
        and replay, committed together when the block ends without error."""
        ...

    async def ping(self) -> None:
        """Raise a `StorageFailure` unless the storage answers (readiness)."""
        ...

    async def feed_lag(self) -> float:
        """Seconds the global feed's horizon is behind now: the age of the
        oldest transaction still open (0 when none). Feed readers see nothing
        newer than it (see store.postgres.feed)."""
        ...

    # --- export and the tenant feed (store.domain.feed, store.repository.export) ---
    async def tenant_feed(self, tenant: str, after: FeedVector, limit: int) -> FeedPage:
        """The tenant's events after `after` in feed order: at most `limit`,
        out of at most `store.domain.feed.scan_limit(limit)` events of each
        partition. Each event's checkpoint, and `next`, is `after` with its
        partition moved past the event (the page's last scanned one)."""
        ...

    async def conversation_events(
        self, conversation_id: uuid.UUID, tenant: str, after_version: int, limit: int
    ) -> list[FeedEvent]:
        """The conversation's events after `after_version`, by version."""
        ...

    async def changed_conversations(
        self, tenant: str, since: datetime, after: uuid.UUID | None, limit: int
    ) -> list[ChangedConversation]:
        """The tenant's conversations (not deleted) changed at or after
        `since`, by id, after `after`."""
        ...

    async def wait_for_feed(self, timeout: float) -> None:  # noqa: ASYNC109 - a wait, by design
        """Return when the feed may have moved, or after at most `timeout` seconds."""
        ...

    # --- compaction (store.compaction) ------------------------------------------------
    async def compaction_candidates(
        self, tenant: str, query: CandidateQuery
    ) -> list[CompactionCandidate]:
        """A page of the tenant's conversations (not deleted, not archived)
        whose agent's current window holds more than `query.max_messages`
        messages or `query.max_tokens` tokens, by (created_at, stream id)
        after `query.after` (see store.compaction.candidates for the cost)."""
        ...

    def try_claim(self, name: str) -> AbstractAsyncContextManager[bool]:
        """Hold `name` against every other holder of this database (every
        process), without waiting: yields whether it was claimed; released
        on exit (PostgreSQL: a session advisory lock, released also when the
        connection dies)."""
        ...

    async def close(self) -> None: ...
