"""The repository's part in retention: which archived conversations may
leave for cold storage, deleting one only as it was copied, and putting one
back as it was recorded (the files: store.repository.cold_storage).

A conversation leaves only when it is archived (read-only: nothing can be
appended while it is copied) and was last written before a time. Its
deletion is guarded by the version the copy ends at: if it was unarchived
and written to after the copy was made, the deletion is refused and
nothing is lost.

Putting one back inserts its events with their versions, types, data and
recording times, in one transaction with its views replayed from them
(`Storage.restoring`, the rebuild's replay); a live conversation of that id
is refused (`ConversationExists`), the tombstone its deletion left is taken
over.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, Sequence

from store.domain.conversation_keys import addressed, conversation_key, current_key, stream_id
from store.domain.errors import InvalidOperation
from store.domain.events import ConversationPurged, DomainEvent
from store.domain.values import Conversation
from store.repository.port import RestoredEvent, StreamRow, WriteSession
from store.repository.rebuild import replay
from store.repository.write_path import WritePath, as_written


class Retention(WritePath):
    """Archived conversations out to cold storage and back."""

    @addressed
    async def delete_archived(self, conversation_id: uuid.UUID, *, version: int) -> None:
        """Delete the conversation (as `delete` does) only if it is still
        archived and still at `version`: what a cold copy holds is all it has.
        `ConcurrencyConflict` if it moved on, `InvalidOperation` if it is no
        longer archived."""

        async def decide(session: WriteSession, stream: StreamRow) -> list[DomainEvent]:
            if not stream.archived:
                raise InvalidOperation(
                    f"conversation {current_key()} is no longer archived; it was not deleted"
                )
            await session.purge()
            return [ConversationPurged()]

        await self._write(
            conversation_id, decide, as_written, expected_version=version, archived_too=True
        )

    async def restore_conversation(
        self, conversation_id: str, pages: AsyncIterable[Sequence[RestoredEvent]]
    ) -> Conversation:
        """Put the conversation back from its events as recorded (`pages`, in
        version order from 1), in one transaction; `ConversationExists` if a
        live conversation has the id. Its views are rebuilt as they are put back."""
        key = conversation_key(conversation_id)
        cid = stream_id(self.tenant, key)
        async with self.storage.restoring(cid, self.tenant, key) as session:
            restored = 0
            async for page in pages:
                await session.insert(page)
                restored += len(page)
            if restored == 0:
                raise InvalidOperation(f"nothing to restore for conversation {key}: no events")
            await replay(session)
        return await self.storage.conversation(cid, self.tenant)
