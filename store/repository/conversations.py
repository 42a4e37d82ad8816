"""The repository's conversations: create one, read it, archive and
unarchive it, change its metadata, list the tenant's, delete one.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError

from store.domain import commands
from store.domain.conversation_keys import ConversationRef, addressed, current_key, new_key
from store.domain.errors import ConcurrencyConflict, ConversationExists, InvalidOperation
from store.domain.events import (
    ConversationArchived,
    ConversationPurged,
    ConversationStarted,
    ConversationUnarchived,
    DomainEvent,
)
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.listing import (
    ConversationPage,
    ConversationQuery,
    conversation_query,
    encode_conversation_cursor,
)
from store.domain.records import ExpectedVersion, StreamState
from store.domain.values import Conversation
from store.repository.port import StreamRow, WriteSession
from store.repository.write_path import ANY, WritePath, as_written


class Conversations(WritePath):
    """A conversation's life: created, archived or not, its metadata, deleted."""

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

        async def decide(session: WriteSession, stream: StreamRow) -> list[DomainEvent]:
            return [started]

        try:
            written = await self._write(
                conversation_id,
                decide,
                as_written,
                expected_version=StreamState.NO_STREAM,
                create=key,
                archived_too=True,  # an archived conversation of that id exists too
            )
        except ConcurrencyConflict as conflict:
            # The id is taken: found here, or by the database's key in a race.
            raise ConversationExists(key, conflict.actual) from None
        now = written.stream.now
        return Conversation(
            id=key,
            tenant=self.tenant,
            version=1,
            current_batch=1,
            next_seq=1,
            archived=False,
            started_at=now,
            metadata=started.metadata,
            updated_at=now,
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
        async def decide(session: WriteSession, stream: StreamRow) -> list[DomainEvent]:
            if stream.archived == archived:
                return []
            return [ConversationArchived() if archived else ConversationUnarchived()]

        await self._write(conversation_id, decide, as_written, archived_too=True)

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

        async def decide(session: WriteSession, stream: StreamRow) -> list[DomainEvent]:
            # Read in this write's own transaction, under its lock: the
            # metadata cannot change before the patch is recorded.
            current = await session.metadata()
            return commands.change_metadata(current, patch, replace=replace)

        await self._write(conversation_id, decide, as_written, expected_version=expected_version)
        return await self.get_conversation(conversation_id)

    async def list_conversations(
        self, query: ConversationQuery | None = None, /, **filters: Any
    ) -> ConversationPage:
        """A page of this tenant's conversations as `query` says (see
        `ConversationQuery`: deleted ones are not listed; newest or oldest
        first by creation time, ties by id; only those whose metadata
        contains `metadata` (as jsonb `@>`), archived or not, created / last
        written in [from, to); `cursor` is a page's `next_cursor`). The
        query's fields may be given as keywords instead."""
        if query is None:
            query = conversation_query(**filters)
        elif filters:
            raise InvalidOperation(f"a query, or filters, not both: {', '.join(sorted(filters))}")
        found = await self.storage.list_conversations(self.tenant, query)
        items = found[: query.limit]
        more = len(found) > query.limit
        next_cursor = encode_conversation_cursor(items[-1].cursor) if more else None
        return ConversationPage(items=tuple(i.conversation for i in items), next_cursor=next_cursor)

    @addressed
    async def delete(self, conversation_id: uuid.UUID) -> None:
        """Purge the conversation: its events, requests and views.

        One event without content remains, so feed readers learn of the
        deletion; the stream row stays as a tombstone so the id cannot be
        reused by mistake. This is what makes a GDPR erasure possible.
        """

        async def decide(session: WriteSession, stream: StreamRow) -> list[DomainEvent]:
            await session.purge()
            return [ConversationPurged()]

        await self._write(conversation_id, decide, as_written, archived_too=True)
