"""Payloads checked against the providers' own SDK request types
(docs/assembler.md, "The SDK types check").

| format | SDK type the whole request body is validated as |
|---|---|
| openai-chat, xml-tools | `openai.types.chat.CompletionCreateParams` (+ `reasoning_content`) |
| openai-responses | `openai.types.responses.ResponseCreateParams` |
| anthropic | `anthropic.types.MessageCreateParams` |
| gemini | `google.genai.types.Content` (each content, and the system instruction) |

(`CompletionCreateParams.messages` are `ChatCompletionMessageParam`s;
`ResponseCreateParams.input` is a `ResponseInputParam` of
`ResponseInputItemParam`s; `MessageCreateParams` holds `MessageParam`s and
the `system` text blocks; the system instruction also goes through
`GenerateContentConfig(system_instruction=...)`.)

The request body gets the fields our payload leaves to the caller (`model`,
and Anthropic's `max_tokens`); nothing else is added or changed.

**How, and what is not as-is.** The OpenAI and Anthropic request types are
TypedDicts: pydantic's `TypeAdapter` validates them, but as they come it
(1) ignores unknown keys, so `cache_control` on a thinking block or a
misspelt key would pass, (2) validates `Iterable[...]` fields lazily, so
the items of `messages` would not be looked at until iterated, and (3)
accepts the SDKs' response *models* (e.g. `anthropic.types.ThinkingBlock`,
which allows extra keys) wherever they may be passed back. So the core
schema `TypeAdapter` builds is used with three changes, and nothing else:
every TypedDict and model refuses unknown keys, and every `Iterable` is
validated as a list. google-genai's types are pydantic models that already
refuse unknown keys; a content is validated, then dumped again
(`by_alias`, no `None`s) and must come back equal: nothing reinterpreted
(a thought signature or inline data that is not base64 fails to validate;
the SDK writes bytes back in the URL-safe base64 alphabet, which is the
same bytes, so base64 fields compare in that alphabet).

What no type says is checked as each SDK does when it sends: the body must
be strict JSON (the SDKs' encoders use `allow_nan=False`). Rules that need
the whole conversation (pairing, alternation, id patterns and lengths) are
the validator's; `test_sdk_types` checks both.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from anthropic.types import MessageCreateParams
from google.genai import types as genai
from openai.types.chat import CompletionCreateParams
from openai.types.responses import ResponseCreateParams
from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

from store.assembler import ProviderFormat

MODEL = "test-model"


def _strict(schema: Any) -> Any:
    """The core schema with unknown keys refused everywhere and Iterables as lists."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    kind = out.get("type")
    if not isinstance(kind, str):  # a field named "type", not a schema's kind
        return out
    if kind in {"typed-dict", "model-fields"}:
        out["extra_behavior"] = "forbid"
    elif kind == "model":
        out["config"] = {**out.get("config", {}), "extra_fields_behavior": "forbid"}
    elif kind == "generator":  # Iterable[X]: validated lazily as a generator
        out["type"] = "list"
    elif kind == "union":
        # Accepts what "smart" accepts (some member validates), without trying
        # every member in two passes to pick the best: only validity matters here.
        out["mode"] = "left_to_right"
    return out


@cache
def strict_validator(request_type: Any) -> SchemaValidator:
    return SchemaValidator(_strict(TypeAdapter(request_type).core_schema))


def _first_errors(error: ValidationError, limit: int = 3) -> str:
    """A union's errors list every member's. The member the value was meant
    to be is the one with the fewest errors: its errors come first."""
    errors = error.errors()
    per_member: dict[tuple[Any, ...], int] = {}
    for e in errors:
        per_member[e["loc"][:-1]] = per_member.get(e["loc"][:-1], 0) + 1
    shown = sorted(errors, key=lambda e: (per_member[e["loc"][:-1]], -len(e["loc"])))[:limit]
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in shown)


def _typed_dict(request_type: Any, body: dict[str, Any]) -> list[str]:
    try:
        strict_validator(request_type).validate_python(body)
    except ValidationError as error:
        return [f"{getattr(request_type, '__name__', request_type)}: {_first_errors(error)}"]
    return []


_URL_SAFE = str.maketrans("+/", "-_")


def same_bytes(value: Any) -> Any:
    """`value` with its base64 fields (inline data, thought signatures) in the
    URL-safe alphabet: google-genai sends bytes that way, whichever it was given."""
    if isinstance(value, list):
        return [same_bytes(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: same_bytes(item) for key, item in value.items()}
    if isinstance(out.get("thoughtSignature"), str):
        out["thoughtSignature"] = out["thoughtSignature"].translate(_URL_SAFE)
    inline = out.get("inlineData")
    if isinstance(inline, dict) and isinstance(inline.get("data"), str):
        out["inlineData"] = {**inline, "data": inline["data"].translate(_URL_SAFE)}
    return out


def _model(model: type[genai.Content], value: dict[str, Any], where: str) -> list[str]:
    try:
        parsed = model.model_validate(value)
    except ValidationError as error:
        return [f"{where}: {_first_errors(error)}"]
    again = parsed.model_dump(mode="json", by_alias=True, exclude_none=True)
    if again != same_bytes(value):
        return [f"{where}: the SDK reads it differently: {again!r} != {value!r}"]
    return []


def _gemini(payload: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for i, content in enumerate(payload.get("contents") or []):
        problems += _model(genai.Content, content, f"contents[{i}]")
    if "systemInstruction" in payload:
        instruction = payload["systemInstruction"]
        problems += _model(genai.Content, instruction, "systemInstruction")
        try:
            genai.GenerateContentConfig(system_instruction=instruction)
        except ValidationError as error:
            problems.append(f"GenerateContentConfig: {_first_errors(error)}")
    return problems


def _chat_reasoning(payload: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The `reasoning_content` field OpenAI-compatible endpoints take on an
    assistant message (not in the `openai` SDK's types): checked here to be
    text on an assistant message, then taken off for the SDK's check."""
    problems: list[str] = []
    messages = []
    for i, message in enumerate(payload.get("messages") or []):
        if isinstance(message, dict) and "reasoning_content" in message:
            value = message["reasoning_content"]
            if message.get("role") != "assistant" or not isinstance(value, str) or not value:
                problems.append(f"messages[{i}].reasoning_content: not an assistant's text")
            message = {k: v for k, v in message.items() if k != "reasoning_content"}
        messages.append(message)
    return problems, {**payload, "messages": messages} if "messages" in payload else payload


def sdk_problems(format: ProviderFormat | str, payload: dict[str, Any]) -> list[str]:
    """What the provider's SDK types refuse in the payload ([] when nothing)."""
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as error:
        return [f"not strict JSON: {error}"]
    format = ProviderFormat(format)
    if format in {ProviderFormat.OPENAI_CHAT, ProviderFormat.XML_TOOLS}:
        problems, payload = _chat_reasoning(payload)
        return problems + _typed_dict(CompletionCreateParams, {"model": MODEL, **payload})
    if format is ProviderFormat.OPENAI_RESPONSES:
        return _typed_dict(ResponseCreateParams, {"model": MODEL, **payload})
    if format is ProviderFormat.ANTHROPIC:
        return _typed_dict(MessageCreateParams, {"model": MODEL, "max_tokens": 1024, **payload})
    return _gemini(payload)
