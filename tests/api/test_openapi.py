"""The OpenAPI document serves client generators: short camelCase
operationIds, a description on every parameter, an example on every request
body, integers typed as integers, and one `Role` component."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.domain.messages import ROLES
from store.memory import MemoryStorage

OPERATION_ID = re.compile(r"^[a-z][a-zA-Z0-9]{2,39}$")
METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}

# The ids clients are generated with: renaming one breaks every client.
STABLE_IDS = {
    ("get", "/conversations"): "listConversations",
    ("post", "/conversations"): "createConversation",
    ("get", "/conversations/{conversation_id}"): "getConversation",
    ("patch", "/conversations/{conversation_id}"): "updateConversation",
    ("post", "/conversations/{conversation_id}/archive"): "archiveConversation",
    ("post", "/conversations/{conversation_id}/unarchive"): "unarchiveConversation",
    ("delete", "/conversations/{conversation_id}"): "deleteConversation",
    ("post", "/conversations/{conversation_id}/messages"): "appendMessages",
    ("get", "/conversations/{conversation_id}/messages"): "listMessages",
    ("get", "/conversations/{conversation_id}/window"): "readWindow",
    ("post", "/conversations/{conversation_id}/assemble"): "assemblePayload",
    ("post", "/conversations/{conversation_id}/batches"): "runBatchOperation",
}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    services = Services(
        storage=MemoryStorage(), tenant_for_key=MemoryKeys().tenant_for_key, limits=Limits()
    )
    return create_app(Settings.from_env(), services=services).openapi()


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield method, path, operation


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = document["components"]["schemas"][name]
    return schema


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_every_operation_has_a_short_camel_case_id(document: dict[str, Any]) -> None:
    ids = [op.get("operationId", "") for _, _, op in _operations(document)]
    bad = [i for i in ids if not OPERATION_ID.match(i)]
    assert not bad, f"operationIds that are not short camelCase: {bad}"
    assert len(ids) == len(set(ids)), "operationIds must be unique"


def test_the_ids_clients_know_stay_the_same(document: dict[str, Any]) -> None:
    found = {(m, p): op["operationId"] for m, p, op in _operations(document)}
    for key, expected in STABLE_IDS.items():
        assert found.get(key) == expected, key


def test_every_parameter_has_a_description(document: dict[str, Any]) -> None:
    missing = [
        f"{method.upper()} {path}: {parameter['name']}"
        for method, path, operation in _operations(document)
        for parameter in operation.get("parameters", [])
        if not parameter.get("description")
    ]
    assert not missing, f"parameters without a description: {missing}"


def _has_example(document: dict[str, Any], media: dict[str, Any]) -> bool:
    if media.get("example") is not None or media.get("examples"):
        return True
    schema = _resolve(document, media.get("schema", {}))
    if schema.get("examples") or schema.get("example") is not None:
        return True
    members = schema.get("oneOf") or schema.get("anyOf") or []
    return bool(members) and all(_resolve(document, m).get("examples") for m in members)


def test_every_request_body_has_an_example(document: dict[str, Any]) -> None:
    missing = [
        f"{method.upper()} {path}"
        for method, path, operation in _operations(document)
        if "requestBody" in operation
        and not all(
            _has_example(document, media) for media in operation["requestBody"]["content"].values()
        )
    ]
    assert not missing, f"request bodies without an example: {missing}"


def test_role_is_one_component_referenced_everywhere(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["Role"]["enum"] == list(ROLES)
    inline = [
        node
        for name, schema in schemas.items()
        if name != "Role"
        for node in _walk(schema)
        if node.get("enum") == list(ROLES)
    ]
    inline += [node for node in _walk(document["paths"]) if node.get("enum") == list(ROLES)]
    assert not inline, "a role enum is inlined instead of referencing #/components/schemas/Role"
    refs = [n for n in _walk(document) if n.get("$ref") == "#/components/schemas/Role"]
    assert len(refs) >= 3  # messages, queries by role, paths by role


def test_a_batch_boundary_is_a_number(document: dict[str, Any]) -> None:
    boundary = document["components"]["schemas"]["Batch"]["properties"]["boundary"]
    assert boundary.get("type") == "number", boundary


def test_sequence_numbers_and_versions_are_integers(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for name, field in (("Conversation", "version"), ("Conversation", "next_seq")):
        assert schemas[name]["properties"][field]["type"] == "integer"
