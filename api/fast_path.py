"""A request that validates answered without FastAPI's general machinery.

FastAPI's request handler resolves a route's dependencies recursively for
every request (each dependency a tree walk of its own: parameters of four
kinds, a cache key, generator checks), parses the Content-Type with the
`email` package, and keeps telemetry hooks: for an append, more of the
server's CPU than the route's own validation and the store's work in
Python together (docs/http-api.md, "Speed").

`lean_handler` builds, once per route, a handler that does the same work
for the requests that go right: a JSON body (`Content-Type:
application/json`) that parses, parameters and body validated by the
route's own fields with FastAPI's own functions (`request_params_to_args`,
`request_body_to_args`: the same limits, the same values), the route's
dependencies called in order, each once, the endpoint, and its answer
serialized by FastAPI's `serialize_response` (validated against the
response model, as before). Anything else — a parameter or a body that does
not validate, a body that is not JSON or not declared as JSON, no body —
goes to FastAPI's own handler untouched, before anything was called, so an
error answers exactly what it answered before (the same problem details,
and the key checked first, as FastAPI does).

A route takes the lean path only if everything it declares is something
this module handles: dependencies that take at most the request, no
generator, no background tasks, no cookies, no forms, a JSON response.
Other routes (streams, the console's files) keep FastAPI's handler alone.

Some of the functions used are FastAPI's private ones (`_get_param_aliases`,
`_validate_value_with_model_field`, ...): the version is pinned
(constraints.txt), and tests/api, which runs every route's errors through
both paths, is what an upgrade must pass.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import params
from fastapi._compat import ModelField, Undefined
from fastapi._compat.shared import field_annotation_is_sequence
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import (
    _get_param_aliases,
    _get_param_model,
    _is_json_field,
    _validate_value_with_model_field,
    request_body_to_args,
    request_params_to_args,
)
from fastapi.routing import APIRoute, serialize_response
from fastapi.utils import is_body_allowed_for_status_code
from starlette.requests import Request
from starlette.responses import Response

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

# The one Content-Type the lean path parses; any other goes to FastAPI's
# handler, which decides (`+json` types, parameters, a missing header).
JSON_TYPE = "application/json"


class Fallback(Exception):
    """The request is not one the lean path answers: FastAPI's handler will.
    Raised before anything was called (no key checked, nothing charged)."""


Params = Callable[[Any, dict[str, Any]], None]


def _params(fields: list[ModelField]) -> Params | None:
    """What `request_params_to_args(fields, received)` does, raising
    `Fallback` on an error: for plain parameters (one value each, the common
    case), without its per-request look-ups of each field's annotation and
    aliases, which are taken here once."""
    if not fields:
        return None
    plain = all(
        _get_param_model(field) is None
        and not _is_json_field(field)
        and not field_annotation_is_sequence(field.field_info.annotation)
        for field in fields
    )
    if not plain:

        def general(received: Any, values: dict[str, Any]) -> None:
            found, errors = request_params_to_args(fields, received)
            if errors:
                raise Fallback
            values.update(found)

        return general
    keyed = [
        (field, [key for _, key in _get_param_aliases(field)], field.field_info.in_.value)  # type: ignore[attr-defined]
        for field in fields
    ]

    def lean(received: Any, values: dict[str, Any]) -> None:
        for field, keys, where in keyed:
            key = next((k for k in keys if k in received), keys[0])
            value = received.get(key)
            found, errors = _validate_value_with_model_field(
                field=field,
                value=Undefined if value is None else value,
                values=values,
                loc=(where, key),
            )
            if errors:
                raise Fallback
            values[field.name] = found

    return lean


def _simple_dependency(dependant: Dependant) -> bool:
    """A dependency `async def f(request)` (or of nothing): called as it is."""
    return (
        inspect.iscoroutinefunction(dependant.call)
        and not dependant.dependencies
        and not (
            dependant.path_params
            or dependant.query_params
            or dependant.header_params
            or dependant.cookie_params
            or dependant.body_params
        )
        and dependant.response_param_name is None
        and dependant.background_tasks_param_name is None
        and dependant.security_scopes_param_name is None
        and dependant.websocket_param_name is None
        and dependant.http_connection_param_name is None
        and dependant.concurrency is None
    )


def eligible(route: APIRoute) -> bool:
    dependant = route.dependant
    call = dependant.call
    return (
        inspect.iscoroutinefunction(call)
        and not inspect.isasyncgenfunction(call)
        and isinstance(route.response_class, DefaultPlaceholder)
        and not route.is_json_stream
        and not route.is_sse_stream
        and not dependant.cookie_params
        and dependant.background_tasks_param_name is None
        and dependant.security_scopes_param_name is None
        and dependant.websocket_param_name is None
        and dependant.http_connection_param_name is None
        and all(_simple_dependency(sub) for sub in dependant.dependencies)
        and not any(isinstance(param.field_info, params.Form) for param in dependant.body_params)
    )


def lean_answer(route: APIRoute) -> Handler:
    """`route`'s lean path: the answer to a request that validates; raises
    `Fallback`, before anything was called, for any other request."""
    dependant = route.dependant
    call = dependant.call
    assert call is not None
    endpoint: Callable[..., Awaitable[Any]] = call
    embed = route._embed_body_fields
    overrides = route.dependency_overrides_provider
    has_body = bool(dependant.body_params)
    dependencies: list[tuple[Callable[..., Awaitable[Any]], str | None, bool, bool]] = [
        (sub.call, sub.name, sub.request_param_name is not None, sub.use_cache)
        for sub in dependant.dependencies
        if sub.call is not None
    ]
    use_dump_json = route.response_field is not None

    path_params = _params(dependant.path_params)
    query_params = _params(dependant.query_params)
    header_params = _params(dependant.header_params)

    async def validated(request: Request) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if path_params is not None:
            path_params(request.path_params, values)
        if query_params is not None:
            query_params(request.query_params, values)
        if header_params is not None:
            header_params(request.headers, values)
        if has_body:
            if request.headers.get("content-type", "").strip().lower() != JSON_TYPE:
                raise Fallback
            if not await request.body():
                raise Fallback
            try:
                body = await request.json()
            except Exception:
                raise Fallback from None
            found, errors = await request_body_to_args(dependant.body_params, body, embed)
            if errors:
                raise Fallback
            values.update(found)
        return values

    async def answer(request: Request) -> Response:
        if overrides is not None and getattr(overrides, "dependency_overrides", None):
            raise Fallback
        values = await validated(request)
        solved: dict[Any, Any] = {}
        for sub_call, name, request_name, use_cache in dependencies:
            if use_cache and sub_call in solved:
                value = solved[sub_call]
            else:
                value = await (sub_call(request) if request_name else sub_call())
                solved[sub_call] = value
            if name is not None:
                values[name] = value
        if dependant.request_param_name:
            values[dependant.request_param_name] = request
        sub_response = Response()
        del sub_response.headers["content-length"]
        sub_response.status_code = None  # type: ignore[assignment]
        if dependant.response_param_name:
            values[dependant.response_param_name] = sub_response
        raw = await endpoint(**values)
        if isinstance(raw, Response):
            return raw
        content = await serialize_response(
            field=route.response_field,
            response_content=raw,
            include=route.response_model_include,
            exclude=route.response_model_exclude,
            by_alias=route.response_model_by_alias,
            exclude_unset=route.response_model_exclude_unset,
            exclude_defaults=route.response_model_exclude_defaults,
            exclude_none=route.response_model_exclude_none,
            dump_json=use_dump_json,
        )
        status = sub_response.status_code or route.status_code
        arguments: dict[str, Any] = {} if status is None else {"status_code": status}
        if use_dump_json:
            response = Response(content=content, media_type=JSON_TYPE, **arguments)
        else:
            response_class = route.response_class
            assert isinstance(response_class, DefaultPlaceholder)
            response = response_class.value(content, **arguments)
        if not is_body_allowed_for_status_code(response.status_code):
            response.body = b""
        response.headers.raw.extend(sub_response.headers.raw)
        return response

    return answer


def lean_handler(answer: Handler, fallback: Handler) -> Handler:
    """A route's handler: its lean `answer` for a request that validates, else `fallback`."""

    async def handle(request: Request) -> Response:
        try:
            return await answer(request)
        except Fallback:
            return await fallback(request)

    return handle
