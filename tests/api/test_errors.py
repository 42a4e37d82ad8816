"""api.errors: which store error is which status, and the one error shape."""

from __future__ import annotations

import json
import logging
import uuid

import httpx
import psycopg
import psycopg.errors
import pytest
from fastapi import FastAPI
from sqlalchemy import exc as sa_exc
from starlette.responses import Response

from api.errors import STORAGE_ERROR_MESSAGE, install_error_handlers, status_of
from api.logging import request_id
from api.middleware import RequestEnvelope
from api.problems import TITLES, field_problems, pointer, problem_response
from store.assembler import InvalidPayload
from store.domain import errors
from tests.api.conftest import BASE_URL, brief

CID = uuid.UUID(int=1)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.ConcurrencyConflict(CID, 1, 2), 409),
        (errors.ConversationExists("user-123"), 409),
        (errors.IdempotencyConflict("k"), 409),
        (errors.ConversationNotFound(CID), 404),
        (errors.ConversationDeleted(CID), 410),
        (errors.InvalidMessage("bad"), 422),
        (errors.InvalidOperation("no"), 422),
        (errors.BoundaryError("split"), 422),
        (errors.ConfigurationError("no role"), 422),
        (InvalidPayload("anthropic", []), 422),
        (errors.ConversationBusy(CID), 409),
        (errors.StorageUnavailable(), 503),
        (errors.StorageError(sqlstate="42P01", error_class="UndefinedTable"), 500),
        (errors.StorageFailure("some other storage failure"), 500),
    ],
)
def test_status_of(error: errors.ConvoStoreError, status: int) -> None:
    assert status_of(error) == status


def _body(response: Response) -> dict[str, object]:
    body = json.loads(bytes(response.body))
    assert isinstance(body, dict)
    return body


def test_a_problem_leaves_out_what_does_not_apply() -> None:
    response = problem_response(404, "ConversationNotFound", "gone")
    assert response.status_code == 404
    assert response.media_type == "application/problem+json"
    assert _body(response) == {
        "type": "ConversationNotFound",
        "title": "No such conversation",
        "status": 404,
        "detail": "gone",
    }


def test_a_problems_instance_is_the_request_id() -> None:
    token = request_id.set("req-1")
    try:
        assert _body(problem_response(404, "ConversationNotFound", "gone"))["instance"] == "req-1"
    finally:
        request_id.reset(token)


def test_a_conflict_names_both_versions() -> None:
    response = problem_response(409, "ConcurrencyConflict", "late", expected="no stream", actual=3)
    body = _body(response)
    assert (body["expected"], body["actual"]) == ("no stream", 3)


def test_an_http_error_without_a_title_of_its_own_has_the_status_phrase() -> None:
    assert _body(problem_response(405, "HTTPError", "Method Not Allowed"))["title"] == (
        "Method Not Allowed"
    )


def test_every_error_class_has_a_title() -> None:
    def subclasses(kind: type[errors.ConvoStoreError]) -> list[type[errors.ConvoStoreError]]:
        return [kind, *(s for sub in kind.__subclasses__() for s in subclasses(sub))]

    import store.assembler  # noqa: F401 - its errors are subclasses too

    missing = {k.__name__ for k in subclasses(errors.ConvoStoreError)} - set(TITLES)
    assert not missing


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        (("body", "messages", 0, "role"), "/body/messages/0/role"),
        (("query", "limit"), "/query/limit"),
        (("header", "Idempotency-Key"), "/header/idempotency-key"),
        (("body", "metadata", "a/b~c"), "/body/metadata/a~1b~0c"),
        ((), ""),
    ],
)
def test_a_fields_pointer_is_a_json_pointer(location: tuple[object, ...], expected: str) -> None:
    assert pointer(location) == expected


def test_a_syntax_error_points_at_the_body_not_at_a_position() -> None:
    problems = field_problems(
        [{"loc": ("body", 17), "msg": "JSON decode error", "type": "json_invalid"}]
    )
    assert problems == [{"pointer": "/body", "detail": "JSON decode error"}]


# Through a tiny app with only the error handlers (no storage needed).

SECRET = "the user's secret message"


def _app_raising(error: BaseException) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.add_middleware(RequestEnvelope)  # the request id (a problem's instance), the catch-all

    @app.get("/conversations/{conversation_id}")
    async def fail(conversation_id: str) -> None:
        raise error

    return app


async def _get(error: BaseException) -> httpx.Response:
    transport = httpx.ASGITransport(app=_app_raising(error), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        return await client.get(f"/conversations/{CID}")


async def test_a_busy_conversation_is_a_409_with_retry_after() -> None:
    response = await _get(errors.ConversationBusy(CID))
    assert response.status_code == 409
    assert response.headers["Retry-After"] == "1"
    error = response.json()
    assert error["type"] == "ConversationBusy"
    assert error["retry_after"] == 1
    assert str(CID) in error["detail"]


async def test_retry_after_is_whole_seconds_rounded_up() -> None:
    response = await _get(errors.ConversationBusy(CID, retry_after=2.2))
    assert response.headers["Retry-After"] == "3"
    assert response.json()["retry_after"] == 3


async def test_an_unavailable_database_is_a_503_with_retry_after() -> None:
    response = await _get(errors.StorageUnavailable("no free database connection", retry_after=5))
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    error = response.json()
    assert error["type"] == "StorageUnavailable"
    assert "no free database connection" in error["detail"]


async def test_a_storage_error_is_a_500_without_internals() -> None:
    response = await _get(errors.StorageError(sqlstate="42P01", error_class="UndefinedTable"))
    assert response.status_code == 500
    assert "Retry-After" not in response.headers
    assert brief(response) == {"type": "StorageError", "detail": STORAGE_ERROR_MESSAGE}


async def test_a_lost_race_names_no_versions() -> None:
    response = await _get(errors.ConcurrencyConflict.lost_race(CID))
    assert response.status_code == 409
    error = response.json()
    assert error["type"] == "ConcurrencyConflict"
    assert "expected" not in error
    assert "actual" not in error


def _wrapped(orig: psycopg.Error) -> sa_exc.DBAPIError:
    wrapped = sa_exc.DBAPIError.instance(
        "SELECT %(v)s", {"v": SECRET}, orig, psycopg.Error, hide_parameters=True
    )
    assert isinstance(wrapped, sa_exc.DBAPIError)
    return wrapped


@pytest.mark.parametrize(
    ("error", "status", "type_"),
    [
        (psycopg.OperationalError("connection failed"), 503, "StorageUnavailable"),
        (_wrapped(psycopg.OperationalError("connection failed")), 503, "StorageUnavailable"),
        (sa_exc.TimeoutError("QueuePool limit reached"), 503, "StorageUnavailable"),
        (_wrapped(psycopg.errors.LockNotAvailable("lock timeout")), 409, "ConversationBusy"),
        (_wrapped(psycopg.errors.InvalidTextRepresentation(SECRET)), 500, "StorageError"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
async def test_an_untranslated_driver_error_is_translated_at_the_edge(
    error: BaseException, status: int, type_: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    response = await _get(error)
    assert response.status_code == status
    assert response.json()["type"] == type_
    if status != 500:
        assert response.headers["Retry-After"] == "1"
    assert SECRET not in response.text
    assert SECRET not in caplog.text


async def test_a_busy_conversation_found_at_the_edge_names_the_conversation() -> None:
    response = await _get(_wrapped(psycopg.errors.LockNotAvailable("lock timeout")))
    assert str(CID) in response.json()["detail"]


async def test_an_unexpected_failure_is_a_500_in_the_same_shape() -> None:
    response = await _get(RuntimeError("secret internals"))
    assert response.status_code == 500
    assert "secret internals" not in response.text
    assert brief(response) == {
        "type": "InternalError",
        "detail": "the server failed to handle the request",
    }
