"""Problem details (RFC 9457) as the library's own exceptions.

The service answers every error as problem details whose `type` is the
store's exception class name (docs/errors.md). The client raises that very
class (`store.domain.errors`), so code written against a local
`Repository` catches the same errors over HTTP: `ConversationNotFound`,
`ConcurrencyConflict` (with `expected` and `actual`), `ConversationBusy`
(with `retry_after`), `InvalidMessage`, the assembler's `EmptyWindow` and
`InvalidPayload`... `str(error)` is the service's
`detail`, and `problem_of(error)` the whole problem.

A type the library has no class for is a `ServiceProblem`: the service's
own types are its subclasses of the same names (`Unauthorized`,
`ValidationError`, `PayloadTooLarge`, `InternalError`); any other answer
(an unknown route, a proxy's error page) is a plain `ServiceProblem`. A
validation problem that points only into the appended messages is an
`InvalidMessage` naming the first one, as the library would raise.
"""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pydantic
from pydantic import BaseModel, ConfigDict

from store.assembler import EmptyWindow, InvalidPayload
from store.domain import errors

PROBLEM_MEDIA_TYPE = "application/problem+json"


class FieldProblem(BaseModel):
    """One field's problem in a validation error."""

    model_config = ConfigDict(frozen=True)

    pointer: str
    detail: str


class Problem(BaseModel):
    """An error response's body (the service's `api.problems.Problem`)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    type: str
    title: str = ""
    status: int
    detail: str = ""
    instance: str | None = None
    errors: list[FieldProblem] | None = None
    expected: int | str | None = None
    actual: int | None = None
    retry_after: float | None = None


class ServiceProblem(Exception):
    """An error answer the library has no class for: the service's own
    problems below (each also a `ConvoStoreError`, named by its `type`), or
    one it does not document (a proxy's 502, an unknown route), which is
    only this."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(problem.detail or problem.title or f"HTTP {problem.status}")


class Unauthorized(ServiceProblem, errors.ConvoStoreError):
    """401: no API key, or an unknown or revoked one."""


class ValidationError(ServiceProblem, errors.InvalidOperation):
    """422: a field, parameter or header breaks its rule; `fields` gives
    each one's JSON Pointer and problem."""

    @property
    def fields(self) -> list[FieldProblem]:
        return list(self.problem.errors or ())


class PayloadTooLarge(ServiceProblem, errors.InvalidOperation):
    """413: the request body is over the service's limit."""


class InternalError(ServiceProblem, errors.ConvoStoreError):
    """500: the service failed (its log has the request's id, `problem.instance`)."""


# The library's classes, by problem type.
LIBRARY_ERRORS: dict[str, type[errors.ConvoStoreError]] = {
    cls.__name__: cls
    for cls in (
        errors.ConcurrencyConflict,
        errors.ConversationExists,
        errors.IdempotencyConflict,
        errors.ConversationBusy,
        errors.ConversationNotFound,
        errors.ConversationDeleted,
        errors.ConversationIsArchived,
        errors.InvalidMessage,
        errors.InvalidOperation,
        errors.BoundaryError,
        errors.ConfigurationError,
        EmptyWindow,
        InvalidPayload,
        errors.StorageFailure,
        errors.StorageUnavailable,
        errors.StorageError,
        errors.ConvoStoreError,
    )
}

_MESSAGE_POINTER = re.compile(r"^/body/messages/(\d+)(?:/|$)")


def problem_of(error: BaseException) -> Problem | None:
    """The problem details the service answered with `error`, if it came
    from the service."""
    for name in ("problem_details", "problem"):
        found = getattr(error, name, None)
        if isinstance(found, Problem):
            return found
    return None


def read_problem(response: httpx.Response) -> Problem:
    """The response's problem details; a body that is not one (a proxy's
    error page) becomes one from the status."""
    try:
        return Problem.model_validate_json(response.content)
    except pydantic.ValidationError:
        return Problem(
            type=f"HTTP{response.status_code}",
            title=response.reason_phrase,
            status=response.status_code,
            detail=f"HTTP {response.status_code} {response.reason_phrase}",
        )


def error_from(
    response: httpx.Response,
    *,
    conversation_id: str | None = None,
    idempotency_key: str | None = None,
) -> errors.ConvoStoreError | ServiceProblem:
    """The exception an error response stands for."""
    problem = read_problem(response)
    header = retry_after_header(response)
    if header is not None and problem.retry_after is None:
        problem = problem.model_copy(update={"retry_after": header})
    error = _library_error(problem, conversation_id, idempotency_key)
    if error is None:
        return _service_error(problem)
    # Under a name of its own: `InvalidMessage.problem` is the library's
    # sentence saying what is wrong, which callers read as text.
    error.problem_details = problem  # type: ignore[attr-defined]
    return error


def _library_error(
    problem: Problem, conversation_id: str | None, idempotency_key: str | None
) -> errors.ConvoStoreError | None:
    if problem.type == "ValidationError":
        return _invalid_message(problem)
    cls = LIBRARY_ERRORS.get(problem.type)
    if cls is None:
        return None
    # Built without the class's __init__, so the message is the service's
    # detail word for word (the class would compose its own); the attributes
    # callers read are set below, as the class's __init__ would.
    error = cls.__new__(cls)
    Exception.__init__(error, problem.detail)
    fields: dict[str, Any] = {"conversation_id": conversation_id}
    if isinstance(error, errors.ConcurrencyConflict):
        fields.update(expected=problem.expected, actual=problem.actual)
    if isinstance(error, errors.IdempotencyConflict):
        fields["key"] = idempotency_key
    if isinstance(error, errors.InvalidMessage):
        fields.update(problem=problem.detail, index=None, client_id=None)
    if isinstance(error, errors.StorageFailure):
        retry_after = problem.retry_after
        if retry_after is None and error.retryable:
            retry_after = errors.DEFAULT_RETRY_AFTER
        fields.update(retry_after=retry_after, sqlstate=None, error_class=None)
    if isinstance(error, errors.StorageUnavailable):
        fields["reason"] = problem.detail
    if isinstance(error, EmptyWindow):
        fields.update(format=None, agent_id=None)  # named in the detail only
    if isinstance(error, InvalidPayload):
        fields.update(format=None, violations=[])
    for name, value in fields.items():
        setattr(error, name, value)
    return error


def _invalid_message(problem: Problem) -> errors.ConvoStoreError | None:
    """A validation problem about appended messages only, as the library's
    `InvalidMessage` naming the first; None for any other."""
    found = [_MESSAGE_POINTER.match(p.pointer) for p in problem.errors or ()]
    if not found or not all(found):
        return None
    indexes = [int(match.group(1)) for match in found if match is not None]
    first = min(indexes)
    details = "; ".join(
        p.detail for p, i in zip(problem.errors or (), indexes, strict=True) if i == first
    )
    return errors.InvalidMessage(details, index=first)


_SERVICE_ERRORS: dict[str, type[ServiceProblem]] = {
    cls.__name__: cls for cls in (Unauthorized, ValidationError, PayloadTooLarge, InternalError)
}


def _service_error(problem: Problem) -> ServiceProblem:
    return _SERVICE_ERRORS.get(problem.type, ServiceProblem)(problem)


def retry_after_header(response: httpx.Response) -> float | None:
    """The `Retry-After` header in seconds (delta-seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    date = response.headers.get("date")
    now = datetime.now(UTC)
    if date:
        with contextlib.suppress(TypeError, ValueError):
            now = parsedate_to_datetime(date)
    return max(0.0, (when - now).total_seconds())
