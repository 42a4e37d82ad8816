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

from api.errors import STORAGE_ERROR_MESSAGE, error_response, install_error_handlers, status_of
from store.assembler import InvalidPayload
from store.domain.errors import (
    BoundaryError,
    ConcurrencyConflict,
    ConfigurationError,
    ConversationBusy,
    ConversationDeleted,
    ConversationNotFound,
    ConvoStoreError,
    IdempotencyConflict,
    InvalidMessage,
    InvalidOperation,
    StorageError,
    StorageFailure,
    StorageUnavailable,
)
from tests.api.conftest import BASE_URL

CID = uuid.UUID(int=1)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ConcurrencyConflict(CID, 1, 2), 409),
        (IdempotencyConflict("k"), 409),
        (ConversationNotFound(CID), 404),
        (ConversationDeleted(CID), 410),
        (InvalidMessage("bad"), 422),
        (InvalidOperation("no"), 422),
        (BoundaryError("split"), 422),
        (ConfigurationError("no role"), 422),
        (InvalidPayload("anthropic", []), 422),
        (ConversationBusy(CID), 409),
        (StorageUnavailable(), 503),
        (StorageError(sqlstate="42P01", error_class="UndefinedTable"), 500),
        (StorageFailure("some other storage failure"), 500),
    ],
)
def test_status_of(error: ConvoStoreError, status: int) -> None:
    assert status_of(error) == status


def test_the_error_body_leaves_out_what_does_not_apply() -> None:
    response = error_response(404, "ConversationNotFound", "gone")
    assert response.status_code == 404
    assert json.loads(bytes(response.body)) == {
        "error": {"type": "ConversationNotFound", "message": "gone"}
    }


def test_a_conflict_body_names_both_versions() -> None:
    response = error_response(409, "ConcurrencyConflict", "late", expected="no stream", actual=3)
    assert json.loads(bytes(response.body))["error"] == {
        "type": "ConcurrencyConflict",
        "message": "late",
        "expected": "no stream",
        "actual": 3,
    }


# Through a tiny app with only the error handlers (no storage needed).

SECRET = "the user's secret message"


def _app_raising(error: BaseException) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/conversations/{conversation_id}")
    async def fail(conversation_id: str) -> None:
        raise error

    return app


async def _get(error: BaseException) -> httpx.Response:
    transport = httpx.ASGITransport(app=_app_raising(error), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        return await client.get(f"/conversations/{CID}")


async def test_a_busy_conversation_is_a_409_with_retry_after() -> None:
    response = await _get(ConversationBusy(CID))
    assert response.status_code == 409
    assert response.headers["Retry-After"] == "1"
    error = response.json()["error"]
    assert error["type"] == "ConversationBusy"
    assert error["retry_after"] == 1
    assert str(CID) in error["message"]


async def test_retry_after_is_whole_seconds_rounded_up() -> None:
    response = await _get(ConversationBusy(CID, retry_after=2.2))
    assert response.headers["Retry-After"] == "3"
    assert response.json()["error"]["retry_after"] == 3


async def test_an_unavailable_database_is_a_503_with_retry_after() -> None:
    response = await _get(StorageUnavailable("no free database connection", retry_after=5))
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    error = response.json()["error"]
    assert error["type"] == "StorageUnavailable"
    assert "no free database connection" in error["message"]


async def test_a_storage_error_is_a_500_without_internals() -> None:
    response = await _get(StorageError(sqlstate="42P01", error_class="UndefinedTable"))
    assert response.status_code == 500
    assert "Retry-After" not in response.headers
    assert response.json() == {"error": {"type": "StorageError", "message": STORAGE_ERROR_MESSAGE}}


async def test_a_lost_race_names_no_versions() -> None:
    response = await _get(ConcurrencyConflict.lost_race(CID))
    assert response.status_code == 409
    error = response.json()["error"]
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
    assert response.json()["error"]["type"] == type_
    if status != 500:
        assert response.headers["Retry-After"] == "1"
    assert SECRET not in response.text
    assert SECRET not in caplog.text


async def test_a_busy_conversation_found_at_the_edge_names_the_conversation() -> None:
    response = await _get(_wrapped(psycopg.errors.LockNotAvailable("lock timeout")))
    assert str(CID) in response.json()["error"]["message"]


async def test_an_unexpected_failure_is_a_500_in_the_same_shape() -> None:
    response = await _get(RuntimeError("secret internals"))
    assert response.status_code == 500
    assert "secret internals" not in response.text
    assert response.json() == {
        "error": {"type": "InternalError", "message": "the server failed to handle the request"}
    }
