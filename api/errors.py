"""Errors as HTTP responses: one JSON shape for every failure.

    {"error": {"type": "ConcurrencyConflict", "message": "...", ...}}

`type` is the store's exception class name (or `Unauthorized`,
`ValidationError`, `HTTPError`); `message` is the store's own text, which
names the problem. A concurrency conflict adds `expected` and `actual`.

    ConcurrencyConflict, IdempotencyConflict                      → 409
    ConversationNotFound (also another tenant's conversation)     → 404
    ConversationDeleted                                           → 410
    InvalidMessage, InvalidOperation (BoundaryError),
    ConfigurationError, request validation                        → 422
    Unauthorized (no key, unknown or revoked key)                 → 401
    anything else (a bug, the database unreachable)               → 500 InternalError

The store raises before it commits, so nothing stored changes on an error.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from store.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    ConversationDeleted,
    ConversationNotFound,
    ConvoStoreError,
    IdempotencyConflict,
    InvalidMessage,
    InvalidOperation,
)


class Unauthorized(Exception):
    """No API key, or one that is unknown or revoked."""


class ErrorDetail(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: str
    message: str
    expected: int | str | None = None
    actual: int | None = None


class ErrorBody(BaseModel):
    """Every error response has this shape."""

    model_config = ConfigDict(frozen=True)

    error: ErrorDetail


# First match wins: subclasses before their bases.
STATUS_OF: tuple[tuple[type[ConvoStoreError], int], ...] = (
    (ConcurrencyConflict, 409),
    (IdempotencyConflict, 409),
    (ConversationNotFound, 404),
    (ConversationDeleted, 410),
    (InvalidMessage, 422),
    (InvalidOperation, 422),
    (ConfigurationError, 422),
)
# A store error not listed above (e.g. the assembler's InvalidPayload) is a
# request the store refused to carry out: 422, with its message.
DEFAULT_STORE_STATUS = 422

# For route declarations: the error responses the OpenAPI document shows.
CONVERSATION_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No API key, or an unknown or revoked one"},
    404: {"model": ErrorBody, "description": "No such conversation (for this key's tenant)"},
    410: {"model": ErrorBody, "description": "The conversation was deleted"},
    422: {"model": ErrorBody, "description": "The request breaks a rule (the message says which)"},
}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **CONVERSATION_ERRORS,
    409: {"model": ErrorBody, "description": "expected_version is stale, or idempotency conflict"},
}


def error_response(
    status: int, type_: str, message: str, *, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    detail = ErrorDetail(type=type_, message=message, **extra)
    return JSONResponse(
        {"error": detail.model_dump(mode="json", exclude_none=True)},
        status_code=status,
        headers=headers,
    )


def status_of(error: ConvoStoreError) -> int:
    for kind, status in STATUS_OF:
        if isinstance(error, kind):
            return status
    return DEFAULT_STORE_STATUS


async def _store_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ConvoStoreError)
    extra: dict[str, Any] = {}
    if isinstance(error, ConcurrencyConflict):
        expected = error.expected
        extra = {
            "expected": expected if isinstance(expected, int) else str(expected),
            "actual": error.actual,
        }
    return error_response(status_of(error), type(error).__name__, str(error), **extra)


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc) or "request"


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = "; ".join(f"{_location(e['loc'])}: {e['msg']}" for e in error.errors())
    return error_response(422, "ValidationError", problems)


async def _unauthorized(request: Request, error: Exception) -> JSONResponse:
    return error_response(401, "Unauthorized", str(error), headers={"WWW-Authenticate": "Bearer"})


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    return error_response(
        error.status_code, "HTTPError", str(error.detail), headers=dict(error.headers or {})
    )


async def _internal_error(request: Request, error: Exception) -> JSONResponse:
    # Starlette logs and re-raises the exception after this response is
    # sent; the client gets the same shape, without internals.
    return error_response(500, "InternalError", "the server failed to handle the request")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ConvoStoreError, _store_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Unauthorized, _unauthorized)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
