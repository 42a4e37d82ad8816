"""The OpenAPI document, shaped for client generators.

- Every operation has a short camelCase `operationId`. Routes name theirs
  explicitly (`operation_id=`), so renaming a Python function never renames a
  generated client's method; a route that does not gets its function's name
  in camelCase (`operation_id_of`), never FastAPI's long default.
- A message's role is one enum component, `Role`, referenced everywhere:
  pydantic inlines a `Literal` at each use, so `shaped` replaces every inline
  copy with a `$ref` (a generator then makes one type, not one per field).
- Every operation behind the key check declares both ways of sending a key
  (`api.deps.SECURITY_SCHEMES`), as FastAPI's security dependencies did.
- Every error response is declared as what it is: `application/problem+json`
  with the `Problem` schema (`api.problems`), FastAPI's own 422
  (`HTTPValidationError`) included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from api.deps import SECURITY_SCHEMES, get_tenant
from api.problems import MEDIA_TYPE, Problem
from store.domain.messages import ROLES

ROLE_COMPONENT = "Role"
_ROLE_REF = f"#/components/schemas/{ROLE_COMPONENT}"
ROLE_SCHEMA: dict[str, Any] = {
    "type": "string",
    "enum": list(ROLES),
    "title": ROLE_COMPONENT,
    "description": "Who wrote a message: system, user, assistant or tool.",
}


def operation_id_of(route: APIRoute) -> str:
    """The fallback operationId: the route function's name in camelCase."""
    first, *rest = route.name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _is_role_enum(node: dict[str, Any]) -> bool:
    return node.get("enum") == list(ROLES)


def _with_role_refs(node: Any) -> Any:
    if isinstance(node, list):
        return [_with_role_refs(item) for item in node]
    if not isinstance(node, dict):
        return node
    if _is_role_enum(node):
        # Keep what describes this use (title, description, default).
        kept = {k: v for k, v in node.items() if k not in ("enum", "type", "const")}
        return {"$ref": _ROLE_REF, **kept}
    return {key: _with_role_refs(value) for key, value in node.items()}


_PROBLEM_REF = {"$ref": f"#/components/schemas/{Problem.__name__}"}
# FastAPI's own validation-error schemas, which no response of ours has.
_FASTAPI_ERROR_SCHEMAS = ("HTTPValidationError", "ValidationError")


def _is_error_status(status: str) -> bool:
    return status[:1] in ("4", "5")


def _problem_responses(document: dict[str, Any]) -> None:
    """Every error response: `application/problem+json`, the `Problem` schema."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            for status, response in operation.get("responses", {}).items():
                if _is_error_status(str(status)):
                    response["content"] = {MEDIA_TYPE: {"schema": dict(_PROBLEM_REF)}}
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name in _FASTAPI_ERROR_SCHEMAS:
        schemas.pop(name, None)
    schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(schema.pop("$defs", {}))
    schemas[Problem.__name__] = schema


def shaped(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with every inline role enum replaced by the `Role` component,
    and every error response a problem document."""
    document = _with_role_refs(document)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas[ROLE_COMPONENT] = ROLE_SCHEMA
    _problem_responses(document)
    return document


def _behind_the_key_check(app: FastAPI) -> set[tuple[str, str]]:
    """(path, method) of every operation that depends on `get_tenant`."""
    found = set()
    for route in app.routes:
        if isinstance(route, APIRoute) and any(
            dependency.call is get_tenant for dependency in route.dependant.dependencies
        ):
            found |= {(route.path_format, method.lower()) for method in route.methods or ()}
    return found


def _secured(document: dict[str, Any], operations: set[tuple[str, str]]) -> None:
    components = document.setdefault("components", {})
    components["securitySchemes"] = {name: dict(s) for name, s in SECURITY_SCHEMES.items()}
    for path, method in operations:
        operation = document.get("paths", {}).get(path, {}).get(method)
        if operation is not None:
            operation["security"] = [{name: []} for name in SECURITY_SCHEMES]
            responses = operation.setdefault("responses", {})
            unauthorized = responses.get("401")
            if unauthorized is not None:
                # Every keyed operation may be over its key's rate (api.ratelimit).
                responses.setdefault(
                    "429",
                    {
                        **unauthorized,
                        "description": "The API key is over its rate of requests or of"
                        " request-body bytes (RateLimited): retry after Retry-After",
                    },
                )


def install_openapi(app: FastAPI) -> None:
    """Serve the shaped document (built once, as FastAPI does)."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = shaped(build())
            _secured(document, _behind_the_key_check(app))
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
