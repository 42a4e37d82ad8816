"""The limits are in the contract: every request field of the OpenAPI
document says how big it may be — a string its `maxLength` (or an enum,
a pattern, a format), a list its `maxItems`, a number its `maximum`, a free
JSON object its size and depth (`x-max-json-chars`, `x-max-depth`, which
JSON Schema has no keyword for) or its keys (`propertyNames`). So clients
and fuzzers know them (store.domain.inputs.Documented)."""

from __future__ import annotations

from typing import Any

from api.app import create_app
from api.deps import Services
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.domain.inputs import MAX_ID_CHARS, MAX_TOOL_CALLS
from store.memory import MemoryStorage

BOUNDED_STRING = {"maxLength", "enum", "pattern", "format", "const"}


def _document() -> dict[str, Any]:
    services = Services(
        storage=MemoryStorage(), tenant_for_key=MemoryKeys().tenant_for_key, limits=Limits()
    )
    return create_app(Settings(), services=services).openapi()


def _unbounded(doc: dict[str, Any], schema: Any, where: str, seen: set[str]) -> list[str]:
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        seen.add(name)
        return _unbounded(doc, doc["components"]["schemas"][name], name, seen)
    found = []
    kind = schema.get("type")
    if kind == "string" and not BOUNDED_STRING & schema.keys():
        found.append(f"{where}: a string without maxLength")
    if kind == "array" and "maxItems" not in schema:
        found.append(f"{where}: a list without maxItems")
    if kind in ("integer", "number") and "maximum" not in schema:
        found.append(f"{where}: a number without maximum")
    if (
        kind == "object"
        and schema.get("additionalProperties") not in (None, False)
        and not {"x-max-json-chars", "propertyNames", "maxProperties"} & schema.keys()
    ):
        found.append(f"{where}: an object of any size")
    for name, child in schema.get("properties", {}).items():
        found += _unbounded(doc, child, f"{where}.{name}", seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for child in schema.get(key, []):
            found += _unbounded(doc, child, where, seen)
    if "items" in schema:
        found += _unbounded(doc, schema["items"], f"{where}[]", seen)
    if isinstance(schema.get("additionalProperties"), dict):
        found += _unbounded(doc, schema["additionalProperties"], f"{where}{{}}", seen)
    return found


def test_every_request_field_of_the_contract_carries_its_limit() -> None:
    doc = _document()
    found: list[str] = []
    seen: set[str] = set()
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                where = f"{method.upper()} {path} {parameter['in']}:{parameter['name']}"
                found += _unbounded(doc, parameter["schema"], where, set())
            body = operation.get("requestBody")
            if body is not None:
                for content in body["content"].values():
                    found += _unbounded(doc, content["schema"], f"{method.upper()} {path}", seen)
    assert not found, "\n".join(sorted(set(found)))


def test_the_documented_limits_are_the_enforced_ones() -> None:
    schemas = _document()["components"]["schemas"]
    call = schemas["ToolCall"]["properties"]
    assert call["id"]["maxLength"] == MAX_ID_CHARS
    assert call["arguments"]["x-max-json-chars"] == 1_000_000
    assert schemas["Message"]["properties"]["tool_calls"]["maxItems"] == MAX_TOOL_CALLS
    assert schemas["Message"]["properties"]["metadata"]["x-max-depth"] == 64
