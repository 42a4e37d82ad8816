"""The repository's fork: a new conversation that starts as a copy of
another's messages up to a point (docs/storage.md, "Forks"), and the one
write that makes it.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from store.domain.context import TODO, TodoItem
from store.domain.conversation_keys import (
    ConversationRef,
    addressed,
    conversation_key,
    current_key,
    new_key,
    stream_id,
)
from store.domain.errors import InvalidOperation
from store.domain.events import (
    AgentConfigured,
    BatchStarted,
    ContextSlotUpdated,
    ConversationForked,
    DomainEvent,
)
from store.domain.inputs import (
    MAX_AGENT_ID_CHARS,
    MAX_METADATA_CHARS,
    identifier_problem,
    json_problem,
)
from store.domain.operations import MAX_INT
from store.domain.projector import Changes, CopyForked, Recorded, project
from store.domain.records import StreamState
from store.domain.values import Conversation
from store.repository.port import EventToWrite, ForkSource, StreamRow, Write, WriteSession
from store.repository.write_path import WritePath, Written


class Forks(WritePath):
    """Forking a conversation."""

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
        chosen: list[ConversationForked] = []

        async def decide(session: WriteSession, stream: StreamRow) -> Write:
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
            chosen.append(forked)
            return _fork_write(forked, parent, source, stream)

        async def answer(session: WriteSession, written: Written) -> Conversation:
            assert written.write is not None
            now = written.stream.now
            return Conversation(
                id=fork_key,
                tenant=self.tenant,
                version=written.version,
                current_batch=1,
                next_seq=written.write.changes.head.next_seq,
                archived=False,
                started_at=now,
                metadata=chosen[0].metadata,
                updated_at=now,
            )

        return await self._write(
            fork_id,
            decide,
            answer,
            expected_version=StreamState.NO_STREAM,
            named=fork_key,
            create=fork_key,
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
