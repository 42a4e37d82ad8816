"""Batch operations (start a batch, truncate, filter, clear, insert, roll back)
and the batches a conversation has had."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, status

from api.deps import RepositoryDep
from api.routing import JSONRoute, read_route, write_route
from api.schemas import (
    BatchOperationRequest,
    BatchPath,
    ConversationIdPath,
    expected_version,
)
from store.domain.messages import StoredMessage
from store.repository import Batch, BatchResult

router = APIRouter(prefix="/conversations", tags=["batches"], route_class=JSONRoute)

BATCH_EXAMPLES: dict[str, Any] = {
    "start_batch": {
        "summary": "Compact: a summary, then the window from message 40 on",
        "value": {
            "operation": "start_batch",
            "boundary_seq": 40,
            "summary": {"role": "user", "content": "Summary of turns 1-39: ..."},
            "adjust": True,
            "expected_version": 57,
        },
    },
    "truncate": {
        "summary": "Keep the last 20 messages",
        "value": {"operation": "truncate", "keep_last": 20, "adjust": True},
    },
    "rollback_to_batch": {
        "summary": "Show what batch 2 showed",
        "value": {"operation": "rollback_to_batch", "batch": 2},
    },
}


@router.post(
    "/{conversation_id}/batches",
    status_code=status.HTTP_201_CREATED,
    **write_route("Run a batch operation (starts a new batch)", "runBatchOperation"),
)
async def run_batch_operation(
    conversation_id: ConversationIdPath,
    body: Annotated[BatchOperationRequest, Body(openapi_examples=BATCH_EXAMPLES)],
    repository: RepositoryDep,
) -> BatchResult:
    """`operation` picks one of start_batch, truncate, filter, clear, insert,
    rollback_to_batch; the operation's fields sit next to it. Nothing is
    deleted: earlier batches stay readable. A boundary that would split a
    tool block is refused (422) unless `adjust`."""
    return await repository.run_batch_operation(
        conversation_id,
        body.command(),
        expected_version=expected_version(body.expected_version),
    )


@router.get(
    "/{conversation_id}/batches",
    **read_route("List the batches", "listBatches"),
)
async def list_batches(
    conversation_id: ConversationIdPath, repository: RepositoryDep
) -> list[Batch]:
    return await repository.batches(conversation_id)


@router.get(
    "/{conversation_id}/batches/{batch}/messages",
    **read_route("Messages appended during a batch", "batchMessages"),
)
async def batch_messages(
    conversation_id: ConversationIdPath, batch: BatchPath, repository: RepositoryDep
) -> list[StoredMessage]:
    """The messages whose batch number is `batch` (to read a batch's visible
    window as it was, use `GET /window?batch=`)."""
    return await repository.batch_messages(conversation_id, batch)
