"""The write path, spelled once: every write of the repository goes through
`WritePath._write`.

    lock the stream row (`Storage.writing`) → may this tenant write to it
    (`_writable`) → answer a retry from what the first attempt stored
    (`replay`) → is the stream where the caller expects (`check_expected`)
    → decide the events (`decide`, against the locked state) → record them
    with their views' changes (`record`) → answer (`answer`, still under
    the lock) → commit.

A write names only what differs — its decision and its answer — so the
order above, and what each step refuses, is the same for all of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from store.domain.commands import Limits
from store.domain.conversation_keys import ConversationRef
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationIsArchived,
    ConversationNotFound,
    IdempotencyConflict,
)
from store.domain.events import DomainEvent, MessageAppended
from store.domain.projector import Recorded, project
from store.domain.records import ExpectedVersion, StreamState
from store.repository.port import (
    NO_LOOKUPS,
    EventToWrite,
    Lookups,
    StaleHead,
    Storage,
    StoredRequest,
    StreamRow,
    Write,
    WriteOptions,
    WriteSession,
)

DEFAULT_TENANT = "default"
ANY = StreamState.ANY

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Written:
    """What a write did: the stream as it locked it, the events it recorded
    after it (none when the decision changed nothing) and the write itself."""

    stream: StreamRow
    recorded: list[Recorded]
    write: Write | None

    @property
    def version(self) -> int:
        """The stream's version after the write."""
        if self.write is not None and self.write.version is not None:
            return self.write.version
        return self.stream.version + len(self.recorded)


# A decision: the events to record after the locked stream, or a whole
# `Write` when the storage writes some of its events itself (a fork's copies).
Decide = Callable[[WriteSession, StreamRow], Awaitable[Sequence[DomainEvent] | Write]]


async def stateless(
    decision: Callable[..., Sequence[DomainEvent]], *arguments: Any
) -> Sequence[DomainEvent]:
    """A decision that reads nothing stored, made under the lock all the
    same: its refusal comes after the conversation's own (not found,
    archived, a stale expected version), as every write's does."""
    return decision(*arguments)


async def new_version(session: WriteSession, written: Written) -> int:
    """The answer of a write whose caller wants the version it reached."""
    return written.version


async def as_written(session: WriteSession, written: Written) -> Written:
    """The answer of a write whose caller builds its own from what it wrote."""
    return written


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


class RepositoryPart:
    """What every part of the `Repository` shares: its storage, tenant and limits."""

    storage: Storage
    tenant: str
    limits: Limits


class WritePath(RepositoryPart):
    """The one way a part of the `Repository` writes."""

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

    async def _write(
        self,
        conversation_id: uuid.UUID,
        decide: Decide,
        answer: Callable[[WriteSession, Written], Awaitable[T]],
        *,
        expected_version: ExpectedVersion = ANY,
        named: ConversationRef | None = None,
        create: str | None = None,
        lookups: Lookups = NO_LOOKUPS,
        optimistic: bool = False,
        archived_too: bool = False,
        replay: Callable[[WriteSession, StreamRow], Awaitable[T | None]] | None = None,
        request: tuple[str, str] | None = None,
    ) -> T:
        """Make one write (the module docstring); its answer.

        `named`: the id errors name, when not `conversation_id` (a fork names
        the new conversation by the id its caller chose). `create`, `lookups`
        and `optimistic` are `Storage.writing`'s. `request`: the idempotency
        key and request hash to remember with the events.
        """
        ref = conversation_id if named is None else named
        options = WriteOptions(create=create, lookups=lookups, optimistic=optimistic)
        async with self.storage.writing(conversation_id, self.tenant, options) as session:
            stream = self._writable(ref, session.stream, archived_too=archived_too)
            if replay is not None:
                # A retry is answered before the expected version is checked:
                # the first attempt already moved the version on.
                replayed = await replay(session, stream)
                if replayed is not None:
                    return replayed
            try:
                check_expected(ref, expected_version, stream.version)
            except ConcurrencyConflict:
                if session.remembered:  # the row may have moved on since: read it
                    raise StaleHead() from None
                raise
            decided = await decide(session, stream)
            if isinstance(decided, Write):
                await session.write(decided)
                written = Written(stream=stream, recorded=[], write=decided)
            elif decided:
                recorded = await record(session, stream, decided, request)
                written = Written(stream=stream, recorded=recorded, write=None)
            else:  # nothing changes: nothing is written
                written = Written(stream=stream, recorded=[], write=None)
            return await answer(session, written)


async def record(
    session: WriteSession,
    stream: StreamRow,
    events: Sequence[DomainEvent],
    request: tuple[str, str] | None = None,
) -> list[Recorded]:
    """Write `events` after the stream's version, with their views."""
    ids = [
        e.message.client_message_id
        for e in events
        if isinstance(e, MessageAppended) and e.message.client_message_id is not None
    ]
    if ids:  # (most appends have none: no coroutine to run)
        await _check_client_ids(session, ids)
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
        # Built anew, not `dataclasses.replace`d: replace reads the class's
        # fields on every call, a cost an append of many messages feels.
        recorded = [
            Recorded(version=r.version, recorded_at=recorded_at, event=r.event) for r in recorded
        ]
    return recorded


async def _check_client_ids(session: WriteSession, ids: list[str]) -> None:
    """A client message id names one message of the conversation, ever."""
    taken = sorted(
        {i for i in ids if ids.count(i) > 1} | set(await session.messages_by_client_id(ids))
    )
    if taken:
        raise IdempotencyConflict(
            ",".join(taken), "a client id in this append is already used by another message"
        )
