"""api.errors: which store error is which status, and the one error shape."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from fastapi import FastAPI

from api.errors import error_response, status_of
from store.assembler import InvalidPayload
from store.errors import (
    BoundaryError,
    ConcurrencyConflict,
    ConfigurationError,
    ConversationDeleted,
    ConversationNotFound,
    ConvoStoreError,
    IdempotencyConflict,
    InvalidMessage,
    InvalidOperation,
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


async def test_an_unexpected_failure_is_a_500_in_the_same_shape(app: FastAPI) -> None:
    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret internals")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
        response = await client.get("/boom")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"type": "InternalError", "message": "the server failed to handle the request"}
    }
