"""Problem details (RFC 9457): the body of every error response.

    HTTP/1.1 409 Conflict
    Content-Type: application/problem+json

    {"type": "ConcurrencyConflict",
     "title": "The conversation is not at the expected version",
     "status": 409,
     "detail": "concurrency conflict on conversation user-123: expected 3, but it is at version 5",
     "instance": "6f1c…",          the request's id (also its X-Request-ID header)
     "expected": 3, "actual": 5}   extension members, where they apply

`type` is a stable slug, the name of the error's class (a relative URI
reference, as RFC 9457 allows): clients branch on it, never on `detail`,
which is for people. `TITLES` has one title per type; `docs/errors.md`
lists every type. A validation problem (422 `ValidationError`) adds
`errors`, one `{pointer, detail}` per field: `pointer` is a JSON Pointer
(RFC 6901) into the request seen as one document,
`{"body": …, "query": …, "path": …, "header": …}` — `/body/messages/0/role`,
`/query/limit`, `/header/idempotency-key`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from api.logging import request_id

MEDIA_TYPE = "application/problem+json"

# One title per type: what kind of problem, the same for every occurrence.
TITLES: dict[str, str] = {
    "ConcurrencyConflict": "The conversation is not at the expected version",
    "ConversationExists": "A conversation with this id exists",
    "IdempotencyConflict": "The idempotency key was used for another request",
    "ConversationBusy": "The conversation is busy",
    "ConversationNotFound": "No such conversation",
    "ConversationDeleted": "The conversation was deleted",
    "ColdCopyMismatch": "A cold copy does not hold what it should",
    "ConversationIsArchived": "The conversation is archived",
    "InvalidMessage": "A message breaks a rule",
    "InvalidOperation": "The operation cannot apply",
    "BoundaryError": "The boundary would split a tool-call block",
    "ConfigurationError": "The stored configuration cannot produce a payload",
    "EmptyWindow": "There is nothing to build a payload from",
    "ToolImageTooLarge": "An image from a tool is over the size limit",
    "InvalidPayload": "The payload breaks the provider's rules",
    "StorageFailure": "The database failed",
    "StorageUnavailable": "The database is unavailable",
    "StorageError": "The database failed",
    "SchemaNotMigrated": "The database is not migrated",
    "ConvoStoreError": "The store refused the request",
    "ValidationError": "The request is not valid",
    "PayloadTooLarge": "The request body is too large",
    "Unauthorized": "An API key is missing, unknown or revoked",
    "ReadOnlyKey": "The API key is read-only",
    "RateLimited": "The API key is over its rate",
    "QuotaExceeded": "The tenant is at one of its caps",
    "InternalError": "The server failed",
}


class FieldProblem(BaseModel):
    """One field's problem in a validation error."""

    model_config = ConfigDict(frozen=True)

    pointer: str = Field(description="JSON Pointer into {body, query, path, header}")
    detail: str


class Problem(BaseModel):
    """RFC 9457 problem details: every error response has this shape."""

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "type": "ConversationNotFound",
                    "title": "No such conversation",
                    "status": 404,
                    "detail": "conversation user-123 does not exist",
                    "instance": "6f1c2d0e9a8b4c7d",
                }
            ]
        },
    )

    type: str = Field(description="A stable slug per error class (docs/errors.md)")
    title: str = Field(description="What kind of problem; the same for every occurrence")
    status: int = Field(description="The HTTP status code")
    detail: str = Field(description="This occurrence, for people")
    instance: str | None = Field(
        default=None, description="The request's id (its X-Request-ID response header)"
    )
    errors: list[FieldProblem] | None = Field(
        default=None, description="ValidationError: each field's problem"
    )
    expected: int | str | None = Field(
        default=None, description="ConcurrencyConflict: the version the request expected"
    )
    actual: int | None = Field(
        default=None, description="ConcurrencyConflict: the version the conversation is at"
    )
    retry_after: int | None = Field(
        default=None, description="Seconds to wait before a retry (also the Retry-After header)"
    )


def title_of(type_: str, status: int) -> str:
    """The type's title; for a type without one (an HTTP error such as an
    unknown route), the status' reason phrase."""
    title = TITLES.get(type_)
    if title is not None:
        return title
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def encodable(text: str) -> str:
    """`text` as valid UTF-8: a lone surrogate becomes its escape."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _token(part: object) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def pointer(location: Sequence[object]) -> str:
    """A validation error's location as a JSON Pointer (`/body/messages/0/role`).
    Header names are case-insensitive: they are given in lower case."""
    if not location:
        return ""
    where, *rest = location
    if where == "header":
        rest = [str(part).lower() for part in rest]
    return "/" + "/".join(_token(part) for part in (where, *rest))


def field_problems(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """pydantic's errors of a request as `{pointer, detail}` items."""
    problems = []
    for error in errors:
        location = tuple(error.get("loc", ()))
        if error.get("type") == "json_invalid":
            location = location[:1]  # (body, position): the position is in the message
        problems.append({"pointer": pointer(location), "detail": encodable(str(error["msg"]))})
    return problems


class ProblemResponse(Response):
    media_type = MEDIA_TYPE

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def problem_response(
    status: int,
    type_: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> ProblemResponse:
    """The problem-details response of one error; extension members given as
    None are left out."""
    body: dict[str, Any] = {
        "type": type_,
        "title": title_of(type_, status),
        "status": status,
        "detail": encodable(detail),
    }
    instance = request_id.get()
    if instance is not None:
        body["instance"] = instance
    body.update((name, value) for name, value in extensions.items() if value is not None)
    return ProblemResponse(body, status_code=status, headers=dict(headers or {}))
