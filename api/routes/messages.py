"""Messages: append (idempotently, with optimistic concurrency), replace content."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from api.deps import RepositoryDep
from api.errors import WRITE_ERRORS
from api.routing import JSONRoute, write_route
from api.schemas import (
    ContentReplace,
    ConversationIdPath,
    IdempotencyKeyHeader,
    MessagesAppend,
    SeqPath,
    Written,
    expected_version,
)
from store.repository import Appended

router = APIRouter(prefix="/conversations", tags=["messages"], route_class=JSONRoute)


@router.post(
    "/{conversation_id}/messages",
    status_code=status.HTTP_201_CREATED,
    summary="Append messages",
    operation_id="appendMessages",
    responses={
        **WRITE_ERRORS,
        200: {"model": Appended, "description": "An idempotent retry: nothing was written"},
    },
)
async def append_messages(
    conversation_id: ConversationIdPath,
    body: MessagesAppend,
    repository: RepositoryDep,
    request: Request,
    response: Response,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Appended:
    """Append messages in one transaction: all are stored, or none (422 names the
    message and the problem). A retry with the same `Idempotency-Key` (or the
    same client message ids) answers 200 with `replayed: true`."""
    appended = await repository.append_messages(
        conversation_id,
        body.messages,
        expected_version=expected_version(body.expected_version),
        idempotency_key=idempotency_key,
    )
    if appended.replayed:
        response.status_code = status.HTTP_200_OK
    else:
        request.app.state.metrics.appended(len(appended.messages))
    return appended


@router.put(
    "/{conversation_id}/messages/{seq}",
    **write_route("Replace a message's content", "replaceContent"),
)
async def replace_content(
    conversation_id: ConversationIdPath,
    seq: SeqPath,
    body: ContentReplace,
    repository: RepositoryDep,
) -> Written:
    """Edit message `seq` in place (an event; the original stays in the log)."""
    version = await repository.replace(
        conversation_id, seq, body.content, expected_version=expected_version(body.expected_version)
    )
    return Written(conversation_id=conversation_id, version=version)
