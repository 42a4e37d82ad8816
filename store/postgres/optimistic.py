"""Appends in one round trip (docs/storage.md, "Appends in one round trip").

An append to a conversation this storage appended to last (`Remembered`,
kept by `RememberedHeads`) is decided on the row as that append left it,
without reading it, and goes out as one statement in autocommit: the write
guarded by the remembered version (`OptimisticSession`), with the appends
to other conversations that wait at the same time (`group_commit`). Had
another write come between, or were the row locked, the guard writes
nothing and the append is decided again the two-round-trip way, under the
lock (`write_session`).

What is remembered is only ever what this process wrote: another process's
writes show as a moved row (a strike), and after MAX_STRIKES the storage
reads the row first until the other writer stops.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from store.domain.commands import Head
from store.domain.messages import ROLES, StoredMessage
from store.domain.projector import AppendMessages, ViewHead
from store.domain.validation import CallState
from store.postgres.group_commit import GroupCommit, GuardedAppend
from store.postgres.write_session import WriteSession
from store.postgres.write_statements import new_version, only_messages, request_row
from store.repository.port import (
    Lookups,
    StaleHead,
    StoredRequest,
    StreamRow,
    Write,
)

# How many conversations a storage remembers (most recently appended to
# first), at most how many of a conversation's unanswered calls, and after
# how many writes from elsewhere it stops appending optimistically.
MAX_REMEMBERED = 10_000
MAX_REMEMBERED_CALLS = 256
MAX_STRIKES = 2


@dataclass(frozen=True, kw_only=True)
class Remembered:
    """What this storage knows of a conversation after its last append
    there: enough to decide the next append without reading the row
    (docs/storage.md, "Appends in one round trip")."""

    tenant: str
    version: int
    head: ViewHead
    # The calls still unanswered that this storage saw made or looked up
    # (call id → agent): a tool result for one of them is decided from here.
    pending: Mapping[str, str]
    # How often lately another write had come between this storage's
    # appends (another process writes the conversation too): from
    # MAX_STRIKES on, an optimistic append would mostly cost a round trip
    # more, so appends read the row first until the other writer stops.
    strikes: int = 0

    def answers(self, tenant: str, lookups: Lookups) -> bool:
        """Can the append with `lookups` be decided from memory alone? Not
        after MAX_STRIKES, nor with a result for a call not known to be
        pending. (With client ids or an idempotency key it is decided as a
        first attempt, and written only if it is one: `append_sql.append_cte`.)"""
        return (
            self.strikes < MAX_STRIKES
            and tenant == self.tenant
            and lookups.answered_call_ids <= self.pending.keys()
        )

    def after(self, write: Write, stream_version: int, strikes: int = 0) -> Remembered | None:
        """What is known after `write` (an append at `stream_version`), with
        `strikes`, if still worth keeping."""
        pending = dict(self.pending)
        for step in write.changes.steps:
            assert isinstance(step, AppendMessages)
            for call in step.calls:
                if call.result_seq is None:
                    pending[call.call_id] = call.agent_id
            for answered in step.answered:
                pending.pop(answered.call_id, None)
        if len(pending) > MAX_REMEMBERED_CALLS:
            return None
        return Remembered(
            tenant=self.tenant,
            version=stream_version + len(write.events),
            head=write.changes.head,
            pending=pending,
            strikes=strikes,
        )


def guarded_append(cid: uuid.UUID, write: Write, *, expected: int) -> GuardedAppend:
    """An optimistic append of messages, written only while the stream is
    at version `expected` (and, with an idempotency key or client ids, only
    if they are new): `append_sql.append_cte(guarded=True)`."""
    step = only_messages(write)
    head = write.changes.head
    request = request_row(write)
    messages = [] if step is None else step.messages
    client_ids = [r.client_message_id for r in messages if r.client_message_id is not None]
    return GuardedAppend(
        conversation_id=cid,
        head={
            "cid": cid,
            "expected": expected,
            "version": new_version(write),
            "next_seq": head.next_seq,
            "current_batch": head.current_batch,
            "role_counts": [head.role_counts[role] for role in ROLES],
            "key": request.get("key"),
            "client_ids": client_ids or None,
        },
        events=[
            {"cid": cid, "version": e.version, "type": e.type, "data": e.data} for e in write.events
        ],
        messages=[{**r.__dict__, "cid": cid} for r in messages],
        calls=[] if step is None else [{**c.__dict__, "cid": cid} for c in step.calls],
        answers=[] if step is None else [{**a.__dict__, "cid": cid} for a in step.answered],
        request={**request, "cid": cid} if request else None,
    )


def is_append(write: Write) -> bool:
    """Messages appended, and nothing else (what `append_messages` writes)."""
    steps = write.changes.steps
    return write.version is None and all(isinstance(s, AppendMessages) for s in steps)


class OptimisticSession:
    """An append decided on what the storage remembers of the conversation
    (`Remembered`), sent as one statement in autocommit: the append guarded
    by the remembered version (`append_sql.append_cte(guarded=True)`),
    which locks the row as it updates it. Whatever the decision asks that memory cannot
    answer raises `StaleHead` before anything is sent; a row found at
    another version means nothing was written (the guard), and raises it
    after."""

    remembered = True

    def __init__(self, group: GroupCommit, cid: uuid.UUID, memory: Remembered) -> None:
        self.group = group
        self.conversation_id = cid
        self.memory = memory
        self.written: Write | None = None
        self.moved = False  # the row was found at another version: nothing written
        self._stream = StreamRow(
            tenant=memory.tenant,
            version=memory.version,
            deleted=False,
            archived=False,
            head=memory.head,
            # Replaced by the transaction's own time once written (`write`).
            now=datetime.now(UTC),
        )

    @property
    def stream(self) -> StreamRow:
        return self._stream

    async def head(self) -> Head:
        return self.memory.head.for_decisions()

    async def calls(self, call_ids: set[str]) -> dict[str, CallState]:
        # A call not known to be pending is taken to be new: were its id in
        # use, the tool_calls primary key refuses the write (`StaleHead`).
        pending = self.memory.pending
        return {i: CallState(agent_id=pending[i], answered=False) for i in call_ids if i in pending}

    async def write(self, write: Write) -> datetime:
        append = guarded_append(self.conversation_id, write, expected=self.memory.version)
        recorded_at = await self.group.write(append)
        if recorded_at is None:  # another write came between: nothing was written
            self.moved = True
            raise StaleHead()
        self.written = write
        return recorded_at

    # An idempotency key or client ids are taken to be new: the write is
    # guarded by their being so, and a retry is answered the way that reads
    # the row first (`StaleHead`), which finds the first attempt's messages.
    async def request(self, idempotency_key: str) -> StoredRequest | None:
        return None

    async def messages_by_client_id(self, client_ids: Sequence[str]) -> dict[str, StoredMessage]:
        return {}

    async def _unanswerable(self, *_: Any, **__: Any) -> Any:
        raise StaleHead()

    # What an append never asks (read under the lock by `WriteSession`).
    pending_call_ids = window = batch_window = key_after = key_before = message = _unanswerable
    messages_written_by = fork_source = purge = metadata = _unanswerable


class RememberedHeads:
    """The conversations this storage appended to last, most recent last
    (at most MAX_REMEMBERED), each as its last append left it."""

    def __init__(self) -> None:
        self._heads: OrderedDict[uuid.UUID, Remembered] = OrderedDict()

    def take(self, conversation_id: uuid.UUID) -> Remembered | None:
        """What is remembered of the conversation, forgotten meanwhile: a
        write that fails forgets it (but `keep_for_retry`), one that commits
        remembers anew (`after_write`)."""
        return self._heads.pop(conversation_id, None)

    def keep_for_retry(self, conversation_id: uuid.UUID, memory: Remembered) -> None:
        """An optimistic append found the row moved on: kept for the retry
        under the lock, which finds the row past it and counts the strike."""
        self._heads[conversation_id] = memory

    def after_write(
        self,
        conversation_id: uuid.UUID,
        session: WriteSession | OptimisticSession,
        previous: Remembered | None,
    ) -> None:
        """After a committed write: remember the conversation if it was an
        append (the next one can then go out in one round trip), else
        leave it forgotten (`take`)."""
        if isinstance(session, OptimisticSession):
            written, memory = session.written, session.memory
            # The guard held: no other write came between.
            strikes = _strikes(memory, came_between=False)
            after = None if written is None else memory.after(written, memory.version, strikes)
        else:
            stream = session.stream
            came_between = (
                previous is not None and stream is not None and previous.version != stream.version
            )
            after = _after_locked(session, previous, _strikes(previous, came_between=came_between))
        if after is None:
            return
        heads = self._heads
        known = heads.get(conversation_id)
        if known is not None and known.version > after.version:
            return  # a later append of this process got here first
        heads[conversation_id] = after
        heads.move_to_end(conversation_id)
        if len(heads) > MAX_REMEMBERED:
            heads.popitem(last=False)


def _strikes(previous: Remembered | None, *, came_between: bool) -> int:
    """Another write between this storage's appends is a strike; an append
    with none between takes one off."""
    if previous is None:
        return 0
    return max(0, min(MAX_STRIKES, previous.strikes + (1 if came_between else -1)))


def _after_locked(
    session: WriteSession, previous: Remembered | None, strikes: int
) -> Remembered | None:
    """What to remember after an append under the lock committed: the row
    as it now is, and the unanswered calls the session knows of."""
    write, stream = session.written, session.stream
    if write is None or stream is None or not is_append(write):
        return None
    if previous is None or previous.version != stream.version:
        pending = {i: s.agent_id for i, s in session.known_calls.items() if not s.answered}
        previous = Remembered(
            tenant=stream.tenant, version=stream.version, head=stream.head, pending=pending
        )
    return previous.after(write, stream.version, strikes)
