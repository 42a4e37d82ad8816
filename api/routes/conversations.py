"""Conversations: create, list, read, update metadata, archive, unarchive, delete."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, status
from fastapi.exceptions import RequestValidationError
from pydantic import AwareDatetime

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS, WRITE_ERRORS
from api.routing import JSONRoute
from api.schemas import (
    ConversationCreate,
    ConversationIdPath,
    ConversationUpdate,
    expected_version,
)
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.listing import MAX_CURSOR_CHARS, ConversationPage, ConversationQuery
from store.repository import MAX_READ_LIMIT, Conversation

router = APIRouter(prefix="/conversations", tags=["conversations"], route_class=JSONRoute)

# A filter is a handful of keys: far below what metadata itself may hold.
MAX_METADATA_FILTER_CHARS = 4096

CursorQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_CURSOR_CHARS,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="A page's `next_cursor`, sent back as it was to read the next page.",
    ),
]
MetadataFilterQuery = Annotated[
    str | None,
    Query(
        max_length=MAX_METADATA_FILTER_CHARS,
        description="A JSON object: only conversations whose metadata contains it (as"
        ' PostgreSQL\'s jsonb `@>`), e.g. `{"project": "billing"}`.',
        examples=['{"project": "billing"}'],
    ),
]


def _time(description: str) -> Any:
    return Query(description=f"{description} (RFC 3339 with a time zone).")


def metadata_filter(raw: str | None) -> dict[str, Any] | None:
    """The `metadata` query parameter as a JSON object, or a 422 naming the problem."""
    if raw is None:
        return None
    problem = None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        problem = "not valid JSON"
    else:
        if not isinstance(value, dict):
            problem = "must be a JSON object"
        else:
            problem = json_problem(value, max_chars=MAX_METADATA_CHARS, what="metadata")
    if problem is not None:
        raise RequestValidationError(
            [{"loc": ("query", "metadata"), "msg": problem, "type": "value_error"}]
        )
    return value  # type: ignore[no-any-return]


@router.get(
    "",
    summary="List conversations",
    operation_id="listConversations",
    responses={k: v for k, v in CONVERSATION_ERRORS.items() if k in (401, 422, 503)},
)
async def list_conversations(
    repository: RepositoryDep,
    limit: Annotated[
        int, Query(ge=1, le=MAX_READ_LIMIT, description=f"Page size, 1..{MAX_READ_LIMIT}.")
    ] = 50,
    cursor: CursorQuery = None,
    order: Annotated[
        Literal["newest", "oldest"],
        Query(description="By creation time, newest (default) or oldest first; ties by id."),
    ] = "newest",
    metadata: MetadataFilterQuery = None,
    archived: Annotated[
        bool | None, Query(description="true: only archived; false: only not archived.")
    ] = None,
    created_from: Annotated[AwareDatetime | None, _time("Created at or after")] = None,
    created_to: Annotated[AwareDatetime | None, _time("Created before")] = None,
    updated_from: Annotated[AwareDatetime | None, _time("Last written at or after")] = None,
    updated_to: Annotated[AwareDatetime | None, _time("Last written before")] = None,
) -> ConversationPage:
    """The key's tenant's conversations (deleted ones are not listed), a page
    at a time: pass `next_cursor` back as `cursor` until it is null."""
    query = ConversationQuery(
        metadata=metadata_filter(metadata),
        archived=archived,
        created_from=created_from,
        created_to=created_to,
        updated_from=updated_from,
        updated_to=updated_to,
        order=order,
        cursor=cursor,
        limit=limit,
    )
    return await repository.list_conversations(query)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a conversation",
    operation_id="createConversation",
    responses=WRITE_ERRORS,
)
async def create_conversation(body: ConversationCreate, repository: RepositoryDep) -> Conversation:
    """Start a conversation owned by the key's tenant (409 if the id is taken)."""
    return await repository.create_conversation(body.id, metadata=body.metadata)


@router.get(
    "/{conversation_id}",
    summary="Read a conversation",
    operation_id="getConversation",
    responses=CONVERSATION_ERRORS,
)
async def get_conversation(
    conversation_id: ConversationIdPath, repository: RepositoryDep
) -> Conversation:
    """Version, current batch, next sequence number, archived flag, metadata."""
    return await repository.get_conversation(conversation_id)


@router.patch(
    "/{conversation_id}",
    summary="Update a conversation's metadata",
    operation_id="updateConversation",
    responses=WRITE_ERRORS,
)
async def update_conversation(
    conversation_id: ConversationIdPath, body: ConversationUpdate, repository: RepositoryDep
) -> Conversation:
    """Merge a JSON merge patch into the metadata (null removes a key), or
    replace it; recorded as a `conversation_metadata_changed` event. A patch
    that changes nothing writes nothing. 409 if `expected_version` is stale
    or the conversation is archived."""
    return await repository.update_metadata(
        conversation_id,
        body.metadata,
        replace=body.mode == "replace",
        expected_version=expected_version(body.expected_version),
    )


@router.post(
    "/{conversation_id}/archive",
    summary="Archive a conversation (make it read-only)",
    operation_id="archiveConversation",
    responses=WRITE_ERRORS,
)
async def archive_conversation(
    conversation_id: ConversationIdPath, repository: RepositoryDep
) -> Conversation:
    """Every write but unarchive and delete is then refused with 409
    `ConversationIsArchived`. Archiving an archived conversation changes nothing."""
    return await repository.archive(conversation_id)


@router.post(
    "/{conversation_id}/unarchive",
    summary="Unarchive a conversation (make it writable again)",
    operation_id="unarchiveConversation",
    responses=WRITE_ERRORS,
)
async def unarchive_conversation(
    conversation_id: ConversationIdPath, repository: RepositoryDep
) -> Conversation:
    """Recorded as a `conversation_unarchived` event; a conversation that is
    not archived is left as it is."""
    return await repository.unarchive(conversation_id)


@router.delete(
    "/{conversation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a conversation (purge its content)",
    operation_id="deleteConversation",
    responses=CONVERSATION_ERRORS,
)
async def delete_conversation(
    conversation_id: ConversationIdPath, repository: RepositoryDep
) -> None:
    """Purge the conversation's events and views (archived or not); its id stays taken."""
    await repository.delete(conversation_id)
