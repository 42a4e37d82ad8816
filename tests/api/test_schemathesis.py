"""Schemathesis against the app's own OpenAPI document (the HTTP API as
docs/http-api.md describes it).

The schema is loaded from the in-process app (`GET /openapi.json`), wired
as `tests/api/conftest.py` wires the in-memory backend, with one key of
tenant `acme` sent on every request. Each operation gets a bounded number
of generated cases (valid and invalid inputs); every response must be no
5xx, carry a status the schema lists for the operation, the content type it
lists, and a body that matches the listed schema.

Generated ids name nothing, so every other case of an operation on one
conversation (but `DELETE` and `archive`, which would end it for the rest)
is pointed at a conversation made up front: the generated bodies and
parameters then reach the storage, not only the 404 path. The rest end in a
404, 410 or 422 — the error paths a hand-written test forgets.
"""

from __future__ import annotations

import itertools
from typing import Any

import hypothesis
import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.memory import MemoryStorage

pytestmark = pytest.mark.slow

_keys = MemoryKeys()
_KEY = _keys.create("acme", "schemathesis")
_app = create_app(
    Settings.from_env(),
    services=Services(
        storage=MemoryStorage(), tenant_for_key=_keys.tenant_for_key, limits=Limits()
    ),
)
schema = schemathesis.openapi.from_asgi("/openapi.json", _app)
_HEADERS = {"Authorization": f"Bearer {_KEY}"}

with TestClient(_app) as _client:
    _made = _client.post("/conversations", json={}, headers=_HEADERS)
    assert _made.status_code == 201, _made.text
    _CONVERSATION: str = _made.json()["id"]

# Operations that would end the conversation for every later case.
_ENDING = {
    "DELETE /conversations/{conversation_id}",
    "POST /conversations/{conversation_id}/archive",
}
_turn = itertools.count()

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@schema.parametrize()
@hypothesis.settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
)
def test_api_conforms_to_its_openapi_document(
    case: schemathesis.Case[Any],
) -> None:
    parameters = case.path_parameters
    if (
        parameters is not None
        and "conversation_id" in parameters
        and case.operation.label not in _ENDING
        and next(_turn) % 2 == 0
    ):
        parameters["conversation_id"] = _CONVERSATION
    case.call_and_validate(headers=_HEADERS, checks=CHECKS)
