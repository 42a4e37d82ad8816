"""Conversations: create, read, archive, delete."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS, WRITE_ERRORS
from api.routing import JSONRoute
from api.schemas import ConversationCreate
from store.repository import Conversation

router = APIRouter(prefix="/conversations", tags=["conversations"], route_class=JSONRoute)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a conversation",
    responses=WRITE_ERRORS,
)
async def create_conversation(body: ConversationCreate, repository: RepositoryDep) -> Conversation:
    """Start a conversation owned by the key's tenant (409 if the id is taken)."""
    return await repository.create_conversation(body.id, metadata=body.metadata)


@router.get("/{conversation_id}", summary="Read a conversation", responses=CONVERSATION_ERRORS)
async def get_conversation(conversation_id: uuid.UUID, repository: RepositoryDep) -> Conversation:
    """Version, current batch, next sequence number, archived flag, metadata."""
    return await repository.get_conversation(conversation_id)


@router.post("/{conversation_id}/archive", summary="Archive a conversation", responses=WRITE_ERRORS)
async def archive_conversation(
    conversation_id: uuid.UUID, repository: RepositoryDep
) -> Conversation:
    return await repository.archive(conversation_id)


@router.delete(
    "/{conversation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a conversation (purge its content)",
    responses=CONVERSATION_ERRORS,
)
async def delete_conversation(conversation_id: uuid.UUID, repository: RepositoryDep) -> None:
    """Purge the conversation's events and views; its id stays taken."""
    await repository.delete(conversation_id)
