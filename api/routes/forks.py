"""Forking a conversation, and pinning messages (kept by compaction)."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import RepositoryDep
from api.routing import JSONRoute, write_route
from api.schemas import (
    ConversationIdPath,
    ExpectedVersionQuery,
    ForkRequest,
    SeqPath,
    Written,
    expected_version,
)
from store.repository import Conversation

router = APIRouter(prefix="/conversations", tags=["forks and pins"], route_class=JSONRoute)


@router.post(
    "/{conversation_id}/fork",
    status_code=status.HTTP_201_CREATED,
    **write_route("Fork a conversation", "forkConversation"),
)
async def fork_conversation(
    conversation_id: ConversationIdPath, body: ForkRequest, repository: RepositoryDep
) -> Conversation:
    """A new conversation whose history is this one's messages up to
    `up_to_seq` (only `agent_id`'s, if given), with the agents' profiles and
    slots. Afterwards the two are independent: writing to, or deleting,
    either leaves the other as it is. 409 if `new_conversation_id` is taken."""
    return await repository.fork(
        conversation_id,
        new_conversation_id=body.new_conversation_id,
        up_to_seq=body.up_to_seq,
        agent_id=body.agent_id,
        metadata=body.metadata,
    )


async def _pin(
    repository: RepositoryDep, conversation_id: str, seq: int, pinned: bool, expected: int | None
) -> Written:
    version = await repository.pin_message(
        conversation_id, seq, pinned, expected_version=expected_version(expected)
    )
    return Written(conversation_id=conversation_id, version=version)


@router.put(
    "/{conversation_id}/messages/{seq}/pin",
    **write_route("Pin a message", "pinMessage"),
)
async def pin_message(
    conversation_id: ConversationIdPath,
    seq: SeqPath,
    repository: RepositoryDep,
    expected_version: ExpectedVersionQuery = None,
) -> Written:
    """Pin message `seq`: a compaction keeps it in the new window. Pinning a
    pinned message writes nothing (the version stays)."""
    return await _pin(repository, conversation_id, seq, True, expected_version)


@router.delete(
    "/{conversation_id}/messages/{seq}/pin",
    **write_route("Unpin a message", "unpinMessage"),
)
async def unpin_message(
    conversation_id: ConversationIdPath,
    seq: SeqPath,
    repository: RepositoryDep,
    expected_version: ExpectedVersionQuery = None,
) -> Written:
    """Unpin message `seq` (a message that is not pinned: nothing is written)."""
    return await _pin(repository, conversation_id, seq, False, expected_version)
