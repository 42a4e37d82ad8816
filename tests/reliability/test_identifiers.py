"""Every identifier a request carries is checked before the database.

A catalogue built from the OpenAPI document itself: every path and query
parameter and every request-body field (at any depth, in every branch of a
union) whose name says it is an id (`id`, `…_id`, `…_ids`) is sent holding
a NUL and holding a control character. Each must be refused (a 4xx naming
the problem) without the storage being asked anything: a NUL reaching
PostgreSQL is a failed statement and a discarded connection, where every
other input is a 422.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.memory import MemoryStorage
from tests.api.conftest import BASE_URL, auth

ID_NAME = re.compile(r"(^id$|_id$|_ids$)")
HOSTILE = {"NUL": "a\x00b", "control": "a\x01b"}


class WatchedStorage:
    """The in-memory storage, noting every operation asked of it."""

    def __init__(self) -> None:
        self._storage = MemoryStorage()
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._storage, name)
        if not callable(found):
            return found

        def asked(*args: Any, **kwargs: Any) -> Any:
            self.asked.append(name)
            return found(*args, **kwargs)

        return asked


@dataclass(frozen=True)
class IdField:
    method: str
    path: str
    where: str  # path, query or body
    pointer: str  # the field: its name, or its JSON pointer in the body
    body_shape: tuple[Any, ...] = ()  # how to build a body around the value
    required: tuple[str, ...] = ()  # the operation's required query parameters

    def __str__(self) -> str:
        return f"{self.method.upper()} {self.path} {self.where}:{self.pointer}"


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    return schema


def _string_like(doc: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """'string' or 'array' when `schema` takes a string or a list of strings."""
    schema = _resolve(doc, schema)
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        kind = _string_like(doc, branch)
        if kind is not None:
            return kind
    if schema.get("type") == "string":
        return "string"
    if schema.get("type") == "array" and _string_like(doc, schema.get("items", {})) == "string":
        return "array"
    return None


def _body_fields(
    doc: dict[str, Any], schema: dict[str, Any], shape: tuple[Any, ...], depth: int = 0
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """(JSON pointer, shape) of every id field under `schema`. A shape is the
    steps from the body to the field: ("key", name, tags) into an object
    (tags: discriminator values the object needs), ("item",) into a list."""
    if depth > 12:
        return
    schema = _resolve(doc, schema)
    branches = schema.get("oneOf", []) + schema.get("anyOf", [])
    mapping = schema.get("discriminator", {})
    for branch in branches:
        tags: dict[str, str] = {}
        if mapping:
            ref = branch.get("$ref")
            for tag, target in mapping.get("mapping", {}).items():
                if target == ref:
                    tags[mapping["propertyName"]] = tag
        yield from _body_fields(doc, branch, (*shape, ("tags", tags)), depth + 1)
    if schema.get("type") == "array":
        yield from _body_fields(doc, schema.get("items", {}), (*shape, ("item",)), depth + 1)
    for name, prop in schema.get("properties", {}).items():
        step = (*shape, ("key", name))
        const_tag = _resolve(doc, prop).get("const")
        if const_tag is not None:
            continue  # a discriminator: set by its union
        kind = _string_like(doc, prop)
        if ID_NAME.search(name) and kind is not None:
            yield "/".join(str(s[1]) for s in step if s[0] == "key"), (*step, ("value", kind))
        else:
            yield from _body_fields(doc, prop, step, depth + 1)


def _build(shape: tuple[Any, ...], value: str) -> Any:
    """The smallest body that puts `value` where `shape` leads."""
    if not shape:
        return value
    step, rest = shape[0], shape[1:]
    if step[0] == "value":
        return [value] if step[1] == "array" else value
    if step[0] == "item":
        return [_build(rest, value)]
    if step[0] == "tags":
        inner = _build(rest, value)
        return {**step[1], **inner} if isinstance(inner, dict) else inner
    return {step[1]: _build(rest, value)}


def catalogue(app: FastAPI) -> list[IdField]:
    doc = app.openapi()
    found: list[IdField] = []
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            parameters = operation.get("parameters", [])
            required = tuple(
                p["name"] for p in parameters if p["in"] == "query" and p.get("required")
            )
            for parameter in parameters:
                if parameter["in"] in ("path", "query") and ID_NAME.search(parameter["name"]):
                    found.append(
                        IdField(method, path, parameter["in"], parameter["name"], (), required)
                    )
            body = operation.get("requestBody")
            if body is None:
                continue
            schema = body["content"]["application/json"]["schema"]
            for pointer, shape in _body_fields(doc, schema, ()):
                found.append(IdField(method, path, "body", pointer, shape, required))
    return found


def _request(field: IdField, value: str) -> tuple[str, str, dict[str, Any]]:
    """(method, url, httpx keyword arguments) sending `value` in `field`."""
    path = field.path
    params: dict[str, str] = {name: "x" for name in field.required}
    for name in re.findall(r"{(\w+)}", field.path):
        if field.where == "path" and name == field.pointer:
            shown = quote(value, safe="")
        else:
            shown = {"seq": "1", "batch": "1", "role": "user", "slot": "notes"}.get(name, "c1")
        path = path.replace("{" + name + "}", shown)
    if field.where == "query":
        params[field.pointer] = value
    kwargs: dict[str, Any] = {"params": params}
    if field.where == "body":
        kwargs["json"] = _build(field.body_shape, value)
    elif field.method in ("post", "put", "patch"):
        kwargs["json"] = {}
    return field.method.upper(), path, kwargs


@pytest.fixture
def watched() -> tuple[FastAPI, WatchedStorage, str]:
    storage = WatchedStorage()
    keys = MemoryKeys()
    key = keys.create("acme", "tests")
    services = Services(
        storage=storage,  # the storage, watched
        tenant_for_key=keys.tenant_for_key,
        limits=Limits(),
    )
    return create_app(Settings(), services=services), storage, key


def test_the_catalogue_holds_every_kind_of_id(
    watched: tuple[FastAPI, WatchedStorage, str],
) -> None:
    """The walk finds ids in paths, queries and nested bodies (a catalogue
    that found nothing would pass vacuously)."""
    names = {str(field) for field in catalogue(watched[0])}
    assert "POST /compactions body:conversation_ids" in names
    assert "POST /conversations body:id" in names
    assert "GET /messages/search query:conversation_id" in names
    assert "GET /conversations/{conversation_id} path:conversation_id" in names
    assert any("tool_calls/id" in name for name in names)
    assert any("client_message_id" in name for name in names)
    assert len(names) >= 30


@pytest.mark.parametrize("kind", sorted(HOSTILE))
async def test_every_id_field_is_checked_before_the_database(
    watched: tuple[FastAPI, WatchedStorage, str], kind: str
) -> None:
    app, storage, key = watched
    transport = httpx.ASGITransport(app=app)
    failures = []
    async with httpx.AsyncClient(
        transport=transport, base_url=BASE_URL, headers=auth(key)
    ) as client:
        for field in catalogue(app):
            if field.where == "path" and kind == "NUL":
                # A NUL in a path segment stands for an escaped '/'
                # (api.middleware.ESCAPED_SLASH): it is never an id's NUL.
                continue
            storage.asked.clear()
            method, url, kwargs = _request(field, HOSTILE[kind])
            response = await client.request(method, url, **kwargs)
            if not 400 <= response.status_code < 500 or response.status_code == 404:
                failures.append(f"{field}: {response.status_code} {response.text[:200]}")
            elif storage.asked:
                failures.append(f"{field}: the storage was asked {storage.asked}")
            elif field.where != "path" and field.pointer.rsplit("/", 1)[-1] not in response.text:
                failures.append(f"{field}: the error does not name the field: {response.text}")
    assert not failures, "\n".join(failures)


async def test_a_compaction_job_checks_a_named_id_before_the_database() -> None:
    """As `convo compact --conversation` names them: a bad id is its
    conversation's failure, and the storage is never asked for it."""
    from store.compaction import CompactionJob, CompactionPolicy
    from store.repository import Repository

    storage = WatchedStorage()
    job = CompactionJob(
        Repository(storage, tenant="acme"),
        CompactionPolicy(max_messages=10),
    )
    report = await job.run(conversation_ids=["a\x00b"])
    (result,) = report.results
    assert result.status == "failed"
    assert "printable" in (result.detail or "")
    assert storage.asked == []
