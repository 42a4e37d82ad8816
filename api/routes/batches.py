"""Batch operations (start a batch, truncate, filter, clear, insert, roll back)
and the batches a conversation has had."""

from __future__ import annotations

import uuid
from typing import assert_never

from fastapi import APIRouter, status

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS, WRITE_ERRORS
from api.schemas import (
    BatchOperation,
    Clear,
    Filter,
    Insert,
    RollbackToBatch,
    StartBatch,
    Truncate,
    expected_version,
)
from store.messages import StoredMessage
from store.postgres import PostgresRepository
from store.repository import Batch, BatchResult

router = APIRouter(prefix="/conversations", tags=["batches"])


async def _apply(
    repository: PostgresRepository, conversation_id: uuid.UUID, operation: BatchOperation
) -> BatchResult:
    expected = expected_version(operation.expected_version)
    match operation:
        case StartBatch():
            return await repository.start_batch(
                conversation_id,
                operation.boundary_seq,
                summary=operation.summary,
                retain=operation.retain,
                adjust=operation.adjust,
                expected_version=expected,
            )
        case Truncate():
            return await repository.truncate(
                conversation_id,
                keep_first=operation.keep_first,
                keep_last=operation.keep_last,
                remove_first=operation.remove_first,
                remove_last=operation.remove_last,
                range_=operation.range,
                role=operation.role,
                adjust=operation.adjust,
                expected_version=expected,
            )
        case Filter():
            return await repository.filter(
                conversation_id,
                roles=operation.roles,
                content_contains=operation.content_contains,
                content_excludes=operation.content_excludes,
                adjust=operation.adjust,
                expected_version=expected,
            )
        case Clear():
            return await repository.clear(
                conversation_id,
                keep_system=operation.keep_system,
                adjust=operation.adjust,
                expected_version=expected,
            )
        case Insert():
            return await repository.insert(
                conversation_id, operation.position, operation.messages, expected_version=expected
            )
        case RollbackToBatch():
            return await repository.rollback_to_batch(
                conversation_id, operation.batch, expected_version=expected
            )
        case _:
            assert_never(operation)


@router.post(
    "/{conversation_id}/batches",
    status_code=status.HTTP_201_CREATED,
    summary="Run a batch operation (starts a new batch)",
    responses=WRITE_ERRORS,
)
async def run_batch_operation(
    conversation_id: uuid.UUID, operation: BatchOperation, repository: RepositoryDep
) -> BatchResult:
    """`operation` picks one of start_batch, truncate, filter, clear, insert,
    rollback_to_batch. Nothing is deleted: earlier batches stay readable. A
    boundary that would split a tool block is refused (422) unless `adjust`."""
    return await _apply(repository, conversation_id, operation)


@router.get("/{conversation_id}/batches", summary="List the batches", responses=CONVERSATION_ERRORS)
async def list_batches(conversation_id: uuid.UUID, repository: RepositoryDep) -> list[Batch]:
    return await repository.batches(conversation_id)


@router.get(
    "/{conversation_id}/batches/{batch}/messages",
    summary="Messages appended during a batch",
    responses=CONVERSATION_ERRORS,
)
async def batch_messages(
    conversation_id: uuid.UUID, batch: int, repository: RepositoryDep
) -> list[StoredMessage]:
    """The messages whose batch number is `batch` (to read a batch's visible
    window as it was, use `GET /window?batch=`)."""
    return await repository.batch_messages(conversation_id, batch)
