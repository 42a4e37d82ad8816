"""The repository's writes of messages and of an agent's context: append
(idempotent, optimistic where the storage can be), edit, pin; an agent's
profile and its context slots.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from store.domain import commands
from store.domain.codec import stored_from, trusted
from store.domain.context import AgentProfile, TodoItem
from store.domain.conversation_keys import addressed, current_key
from store.domain.errors import IdempotencyConflict, InvalidOperation
from store.domain.events import DomainEvent, MessageAppended
from store.domain.idempotency import client_ids, replay_by_client_ids, request_hash
from store.domain.inputs import idempotency_key_problem
from store.domain.messages import MAIN_AGENT, Content, Message, StoredMessage
from store.domain.operations import MAX_INT
from store.domain.projector import Recorded
from store.domain.records import ExpectedVersion
from store.domain.validation import call_ids_involved, parse_message
from store.domain.values import Appended
from store.repository.port import Lookups, StaleHead, StreamRow, WriteSession
from store.repository.write_path import ANY, WritePath, Written, new_version, stateless


class Appends(WritePath):
    """Messages appended, edited and pinned; agents configured, slots updated."""

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
        request = None
        if idempotency_key is not None:
            request = (idempotency_key, request_hash(parsed))

        async def replay(session: WriteSession, stream: StreamRow) -> Appended | None:
            found = await _find_replay(session, parsed, request)
            if found is None:
                return None
            return Appended(
                conversation_id=current_key(),
                version=stream.version,
                messages=tuple(found),
                replayed=True,
            )

        async def decide(session: WriteSession, stream: StreamRow) -> list[DomainEvent]:
            return await commands.append_messages(session, parsed, self.limits)

        async def answer(session: WriteSession, written: Written) -> Appended:
            # Built as the store's own value (`codec.trusted`): pydantic
            # would check each of the messages it just numbered again.
            return trusted(
                Appended,
                {
                    "conversation_id": current_key(),
                    "version": written.version,
                    "messages": tuple(_stored(written.recorded, written.stream)),
                    "replayed": False,
                },
            )

        # Without a key or client ids there is no earlier attempt to find.
        retry = replay if request is not None or ids else None
        for optimistic in (True, False):
            try:
                return await self._write(
                    conversation_id,
                    decide,
                    answer,
                    expected_version=expected_version,
                    lookups=lookups,
                    optimistic=optimistic,
                    replay=retry,
                    request=request,
                )
            except StaleHead:
                if not optimistic:
                    raise
                # What the storage remembered was out of date; nothing was
                # written: decide again on the row read under its lock.
        raise AssertionError("unreachable: the write under the lock answers or raises")

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

        return await self._write(
            conversation_id,
            lambda session, _: commands.replace_content(session, seq, content, self.limits),
            new_version,
            expected_version=expected_version,
        )

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

        return await self._write(
            conversation_id,
            lambda session, _: commands.pin_message(session, seq, pinned),
            new_version,
            expected_version=expected_version,
        )

    @addressed
    async def configure_agent(
        self,
        conversation_id: uuid.UUID,
        profile: AgentProfile,
        *,
        expected_version: ExpectedVersion = ANY,
    ) -> int:
        return await self._write(
            conversation_id,
            lambda *_: stateless(commands.configure_agent, profile),
            new_version,
            expected_version=expected_version,
        )

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
        return await self._write(
            conversation_id,
            lambda *_: stateless(commands.update_slot, agent_id, slot, value),
            new_version,
            expected_version=expected_version,
        )


async def _find_replay(
    session: WriteSession, parsed: Sequence[Message], request: tuple[str, str] | None
) -> list[StoredMessage] | None:
    """The messages an earlier identical append stored, if this is a retry."""
    if request is not None:
        idempotency_key, hash_ = request
        stored = await session.request(idempotency_key)
        if stored is None:
            return None
        if stored.request_hash != hash_:
            raise IdempotencyConflict(idempotency_key, "the request differs from the first one")
        return await session.messages_written_by(stored.first_version, stored.last_version)
    ids = client_ids(parsed)
    if not ids:
        return None
    return replay_by_client_ids(parsed, await session.messages_by_client_id(ids))


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
