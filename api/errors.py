"""Errors as HTTP responses: RFC 9457 problem details for every failure
(`api.problems`: `type`, `title`, `status`, `detail`, `instance`).

`type` is the store's exception class name (or `Unauthorized`,
`ValidationError`, `PayloadTooLarge`, `HTTPError`, `InternalError`);
`detail` is the store's own text, which names the problem. A concurrency
conflict adds `expected` and `actual` (when known); a busy conversation or
an unavailable database adds `retry_after` (seconds), also sent as a
`Retry-After` header; a validation error adds `errors`, one
`{pointer, detail}` per field.

    ConversationExists (creating an id the tenant has)            → 409
    ConcurrencyConflict                                           → 409
    IdempotencyConflict                                           → 409
    ConversationBusy (+ Retry-After)                              → 409
    ConversationNotFound (also another tenant's conversation)     → 404
    ConversationDeleted                                           → 410
    ConversationIsArchived (unarchive it first)                   → 409
    InvalidMessage                                                → 422
    BoundaryError                                                 → 422
    InvalidOperation                                              → 422
    ConfigurationError                                            → 422
    StorageUnavailable (+ Retry-After)                            → 503
    StorageError (message without internals)                      → 500
    StorageFailure (any other)                                    → 500
    ConvoStoreError (any other, e.g. InvalidPayload)              → 422
    request validation, a body that is not UTF-8 JSON             → 422 ValidationError
    a body over CONVO_MAX_BODY_BYTES                              → 413 PayloadTooLarge
    Unauthorized (no key, unknown or revoked key)                 → 401
    ReadOnlyKey (a read-only key on a route that writes)          → 403
    anything else (a bug)                                         → 500 InternalError

A bug's 500 is sent by the request's envelope (`api.middleware`, its
catch-all) as an ordinary response: Starlette's own catch-all (an
`Exception` handler) sends its response and then re-raises, so the server
drops the client's keep-alive connection and logs the exception with its
message, which can quote content. The envelope logs one line instead: the
exception's classes and frames, never its message
(`api.logging.describe_error`).

Details are made safe to encode: a lone surrogate the client sent (and an
error quoted) is shown as `\\udXXX`, not sent as invalid UTF-8.

A driver error that reaches the app untranslated (a code path that did not
go through `store.postgres.driver_errors.translate`) is translated here,
so a database that is down is a 503 on every route, never a 500.

The store raises before it commits, so nothing stored changes on an error;
the one exception is a 503 for a connection lost during the commit itself,
whose write may have been stored: retry it with the same `Idempotency-Key`
(or client message ids) and a stored write is answered, not repeated.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException
from starlette.types import Scope

from api.logging import describe_error
from api.problems import Problem, ProblemResponse, field_problems, problem_response
from store.domain import errors
from store.postgres.driver_errors import translate

_log = logging.getLogger("convo.http")


class Unauthorized(Exception):
    """No API key, or one that is unknown or revoked."""


class ReadOnlyKey(Exception):
    """A read-only key sent to a route that writes (api.deps)."""


class BodyRefused(HTTPException):
    """The request body cannot be parsed as UTF-8 JSON (422): raised while
    the body is parsed (`api.routing`), as an HTTPException so FastAPI lets
    it through instead of answering 400."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(422, f"body: {problem}")


class BodyTooLarge(HTTPException):
    """The request body is over the limit (413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"body: the request body is over the limit of {limit} bytes")

    def response(self) -> ProblemResponse:
        return problem_response(413, "PayloadTooLarge", str(self.detail))


# First match wins: subclasses before their bases.
STATUS_OF: tuple[tuple[type[errors.ConvoStoreError], int], ...] = (
    (errors.ConversationExists, 409),
    (errors.ConcurrencyConflict, 409),
    (errors.IdempotencyConflict, 409),
    (errors.ConversationBusy, 409),
    (errors.ConversationNotFound, 404),
    (errors.ConversationDeleted, 410),
    (errors.ConversationIsArchived, 409),
    (errors.InvalidMessage, 422),
    (errors.BoundaryError, 422),
    (errors.InvalidOperation, 422),
    (errors.ConfigurationError, 422),
    (errors.StorageUnavailable, 503),
    (errors.StorageError, 500),
    (errors.StorageFailure, 500),
)
# A store error not listed above (e.g. the assembler's InvalidPayload) is a
# request the store refused to carry out: 422, with its message.
DEFAULT_STORE_STATUS = 422

# The message of a 500 StorageError: what failed is in the server's log
# (class and SQLSTATE), not in the response.
STORAGE_ERROR_MESSAGE = "the database failed to carry out the request"

# For route declarations: the error responses the OpenAPI document shows.
CONVERSATION_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "No API key, or an unknown or revoked one"},
    404: {"model": Problem, "description": "No such conversation (for this key's tenant)"},
    410: {"model": Problem, "description": "The conversation was deleted"},
    422: {"model": Problem, "description": "The request breaks a rule (the message says which)"},
    503: {
        "model": Problem,
        "description": "The database is unreachable or overloaded: retry after Retry-After",
    },
}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **CONVERSATION_ERRORS,
    413: {"model": Problem, "description": "The request body is over CONVO_MAX_BODY_BYTES"},
    409: {
        "model": Problem,
        "description": "expected_version is stale, an idempotency conflict, the"
        " conversation is archived (ConversationIsArchived: unarchive it first), or it is"
        " busy (ConversationBusy: retry after Retry-After)",
    },
}


def status_of(error: errors.ConvoStoreError) -> int:
    for kind, status in STATUS_OF:
        if isinstance(error, kind):
            return status
    return DEFAULT_STORE_STATUS


def retry_after_seconds(seconds: float) -> int:
    """`Retry-After` takes whole seconds: round up, never negative."""
    return max(0, math.ceil(seconds))


def store_error_response(error: errors.ConvoStoreError) -> ProblemResponse:
    status = status_of(error)
    message = str(error)
    extra: dict[str, Any] = {}
    headers: dict[str, str] | None = None
    if isinstance(error, errors.ConcurrencyConflict):
        expected = error.expected
        if expected is not None:
            extra["expected"] = expected if isinstance(expected, int) else str(expected)
        extra["actual"] = error.actual
    if isinstance(error, errors.StorageFailure):
        if error.retry_after is not None:
            seconds = retry_after_seconds(error.retry_after)
            extra["retry_after"] = seconds
            headers = {"Retry-After": str(seconds)}
        if status >= 500 and not isinstance(error, errors.StorageUnavailable):
            # The driver's class and SQLSTATE are for the log, not the client.
            message = STORAGE_ERROR_MESSAGE
    return problem_response(status, type(error).__name__, message, headers=headers, **extra)


def _count(request: Request, error: errors.ConvoStoreError) -> None:
    """A storage failure, counted in the app's metrics (`api.metrics`)."""
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.storage_error(error)


async def _store_error(request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, errors.ConvoStoreError)
    _count(request, error)
    return store_error_response(error)


async def _driver_error(request: Request, error: Exception) -> ProblemResponse:
    # A driver error no storage call translated: translate it here (this
    # also logs it, without statement or parameters).
    ours = translate(error, conversation_id=request.path_params.get("conversation_id"))
    if ours is None:
        return await _internal_error(request, error)
    _count(request, ours)
    return store_error_response(ours)


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc) or "request"


async def _validation_error(request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, RequestValidationError)
    errors = error.errors()
    # `detail` sums up every field's problem in one line; `errors` has them one by one.
    summary = "; ".join(f"{_location(e['loc'])}: {e['msg']}" for e in errors)
    return problem_response(422, "ValidationError", summary, errors=field_problems(errors))


async def _unauthorized(request: Request, error: Exception) -> ProblemResponse:
    return problem_response(401, "Unauthorized", str(error), headers={"WWW-Authenticate": "Bearer"})


async def _read_only_key(request: Request, error: Exception) -> ProblemResponse:
    return problem_response(403, "ReadOnlyKey", str(error))


async def _http_error(request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, HTTPException)
    return problem_response(
        error.status_code, "HTTPError", str(error.detail), headers=dict(error.headers or {})
    )


async def _body_refused(request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, BodyRefused)
    return problem_response(
        422,
        "ValidationError",
        str(error.detail),
        errors=[{"pointer": "/body", "detail": error.problem}],
    )


async def _body_too_large(request: Request, error: Exception) -> ProblemResponse:
    assert isinstance(error, BodyTooLarge)
    return error.response()


def internal_error_response() -> ProblemResponse:
    """A bug's 500: the same shape, without internals."""
    return problem_response(500, "InternalError", "the server failed to handle the request")


async def _internal_error(request: Request, error: Exception) -> ProblemResponse:
    log_unhandled(error, request.scope)
    return internal_error_response()


def route_path(scope: Scope) -> str:
    """The request's route as declared (`/conversations/{conversation_id}`),
    or its path when no route matched."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else str(scope.get("path", ""))


def log_unhandled(error: BaseException, scope: Scope) -> None:
    """One line for a bug: where, and the exception's classes and frames."""
    _log.error(
        "unhandled %s in %s %s",
        type(error).__qualname__,
        scope.get("method"),
        route_path(scope),
        extra=describe_error(error),
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(errors.ConvoStoreError, _store_error)
    # Translated here, not left to the catch-all, so a database that is down
    # is a 503 (and its message, which can quote stored values, is not logged).
    for driver_error in (psycopg.Error, sa_exc.DBAPIError, sa_exc.TimeoutError):
        app.add_exception_handler(driver_error, _driver_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Unauthorized, _unauthorized)
    app.add_exception_handler(ReadOnlyKey, _read_only_key)
    app.add_exception_handler(BodyRefused, _body_refused)
    app.add_exception_handler(BodyTooLarge, _body_too_large)
    app.add_exception_handler(HTTPException, _http_error)
    # Not `add_exception_handler(Exception, ...)`: the envelope's catch-all
    # answers a bug (see the module's docstring).
