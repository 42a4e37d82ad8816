"""What a value from outside may be: its type, its range, its size.

Every field of a message, a profile, a slot or a request has a limit here,
so hostile input is refused with an error naming the field, before it can
reach a column that would refuse it less politely (a NUL in a `text`
column, a lone surrogate in `jsonb`, an integer past `bigint`, NaN in
JSON) or make a request unboundedly expensive (a 50 MB argument object,
10,000 tool calls, JSON nested 1,000 levels deep).

    text             no NUL (U+0000) and no lone surrogate (U+D800–U+DFFF):
                     PostgreSQL stores neither, and neither is UTF-8
    identifiers      1–200 printable characters (tool call ids and names,
                     client message ids, todo item ids)
    agent ids        1–100 printable characters
    slot names       1–100 characters: letters, digits, '-' and '_'
    JSON objects     (tool arguments, metadata) finite numbers only, integers
                     within 64 bits, at most 64 levels deep; arguments at most 1,000,000 characters
                     of compact JSON, metadata at most 65,536
    integers         seqs and versions fit a bigint, batch numbers and token
                     estimates an integer; never a bool, a float or a string

The limits hold for what comes in, not for what the log already holds:
`store.domain.events.from_data` validates recorded events with the `STORED`
context, and these checks let that through, so a log written under other
limits still replays (`convo rebuild`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationInfo,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

MAX_BIGINT = 2**63 - 1  # PostgreSQL bigint: seqs, versions, ordinals
MAX_INTEGER = 2**31 - 1  # PostgreSQL integer: batch numbers, token estimates
MAX_ID_CHARS = 200
MAX_AGENT_ID_CHARS = 100
MAX_SLOT_NAME_CHARS = 100
MAX_TEXT_CHARS = 1_000_000  # prompts, role definitions, slot text, reasoning
MAX_TOOL_CALLS = 128  # per message
MAX_PARTS = 1_000  # content parts per message
MAX_REASONING = 128  # reasoning items per message
MAX_TODO_ITEMS = 1_000
MAX_JSON_DEPTH = 64
MAX_ARGUMENTS_CHARS = 1_000_000  # one tool call's arguments, as compact JSON
MAX_METADATA_CHARS = 65_536  # a message's or a conversation's metadata

# Validation context under which recorded events are read back: the limits
# applied when they were written, and a replay must not refuse them now.
STORED: dict[str, Any] = {"stored": True}

NUL = "contains a NUL character (U+0000), which cannot be stored"
SURROGATE = "contains a lone surrogate (U+D800–U+DFFF), which is not valid Unicode"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored as text, or None."""
    if value.isascii():  # a flag on the string: no scan
        return NUL if "\x00" in value else None
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    return NUL if found.group() == "\x00" else SURROGATE


def identifier_problem(value: str, max_chars: int) -> str | None:
    """Why `value` is not an identifier of at most `max_chars` printable
    characters, or None."""
    if not value:
        return "must not be empty"
    if len(value) > max_chars:
        return f"is {len(value)} characters, over the limit of {max_chars}"
    if not value.isprintable():
        return text_problem(value) or "contains a control or unprintable character"
    return None


def idempotency_key_problem(value: str) -> str | None:
    """Why `value` is not an idempotency key (1–200 visible ASCII
    characters), or None."""
    if not 1 <= len(value) <= MAX_ID_CHARS:
        return f"must be 1 to {MAX_ID_CHARS} characters, got {len(value)}"
    if not all("!" <= c <= "~" for c in value):
        return "may hold only visible ASCII characters (! to ~)"
    return None


def slot_name_problem(value: str) -> str | None:
    if len(value) > MAX_SLOT_NAME_CHARS:
        return f"slot names are at most {MAX_SLOT_NAME_CHARS} characters; got {len(value)}"
    if not value.replace("_", "").replace("-", "").isalnum():
        return f"slot names are letters, digits, '-' and '_'; got {_shown(value)!r}"
    return None


def _shown(key: object) -> str:
    text = str(key)
    if len(text) > 40:
        text = text[:40] + "…"
    return text if text.isprintable() else ascii(text)[1:-1]


def _at(path: tuple[object, ...], problem: str) -> str:
    if not path:
        return problem
    return f"at {'/'.join(_shown(p) for p in path)}: {problem}"


def json_problem(
    value: Any, *, max_chars: int, max_depth: int = MAX_JSON_DEPTH, what: str = "value"
) -> str | None:
    """Why `value` (parsed JSON) cannot be stored, or None: a non-finite
    number, text that cannot be stored (in a key or a string), nesting
    deeper than `max_depth`, or more than `max_chars` characters of compact
    JSON (escapes aside). Iterative, and it stops at the first problem, so
    a hostile value costs at most what its size limit allows."""
    size = 0
    stack: list[tuple[Any, int, tuple[object, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            size += len(item) + 2
            if problem := text_problem(item):
                return _at(path, problem)
        elif item is None or isinstance(item, bool):
            size += 5
        elif isinstance(item, int):
            if not -(2**63) <= item <= MAX_BIGINT:
                return _at(path, f"{item} is past the 64-bit integer range")
            size += len(str(item))
        elif isinstance(item, float):
            if not math.isfinite(item):
                return _at(path, f"{item} is not a JSON number (numbers must be finite)")
            size += len(repr(item))
        elif isinstance(item, dict | list | tuple):
            if depth > max_depth:
                return _at(path, f"nested deeper than {max_depth} levels")
            size += 1 + len(item)
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return _at(path, f"key {key!r} is not a string")
                    if problem := text_problem(key):
                        return _at(path, f"a key {problem}")
                    size += len(key) + 3
                    stack.append((child, depth + 1, (*path, key)))
            else:
                stack.extend((child, depth + 1, (*path, i)) for i, child in enumerate(item))
        else:
            return _at(path, f"a {type(item).__name__} is not a JSON value")
        if size > max_chars:
            return f"{what} is over the limit of {max_chars} characters of JSON"
    return None


# --- pydantic field types ----------------------------------------------------------------


def _stored(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, dict) and bool(context.get("stored"))


def rule(kind: str, problem_of: Callable[[Any], str | None]) -> AfterValidator:
    """A validator refusing a value `problem_of` finds fault with, by its
    problem (pydantic names the field), except under the `STORED` context."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if value is not None and not _stored(info):
            problem = problem_of(value)
            if problem is not None:
                raise PydanticCustomError(kind, problem)
        return value

    return AfterValidator(check)


# The keyword that bounds each kind of JSON value's size.
_LENGTH_KEYWORDS = {"string": "maxLength", "array": "maxItems", "object": "maxProperties"}


@dataclass(frozen=True)
class Documented:
    """A limit a validator here enforces, written into the JSON schema (and
    so the OpenAPI document) where it has a keyword, changing nothing in the
    validation: the rules' own messages stay what a client reads.
    `length` is a string's `maxLength`, a list's `maxItems` or an object's
    `maxProperties`, whichever the type's schema is."""

    keywords: tuple[tuple[str, Any], ...] = ()
    length: int | None = None  # maxLength of a string, maxItems of an array

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        target.update(self.keywords)
        keyword = _LENGTH_KEYWORDS.get(target.get("type", ""))
        if self.length is not None and keyword is not None:
            target[keyword] = self.length
        return schema


def documented(**keywords: Any) -> Documented:
    return Documented(tuple(keywords.items()))


class _AtMost:
    """`at_most`: the rule, and its limit in the JSON schema."""

    def __init__(self, limit: int, validator: AfterValidator) -> None:
        self.validator = validator
        self.documented = Documented(length=limit)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return self.validator.__get_pydantic_core_schema__(source, handler)

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return self.documented.__get_pydantic_json_schema__(core_schema, handler)


def at_most(limit: int, what: str) -> Any:
    """A validator refusing a collection or string longer than `limit`
    (`maxItems` or `maxLength` in the schema)."""

    def problem(value: Any) -> str | None:
        if len(value) > limit:
            return f"{len(value)} {what}, over the limit of {limit}"
        return None

    return _AtMost(limit, rule("too_long", problem))


def json_object(max_chars: int, what: str) -> AfterValidator:
    return rule("json_value", lambda v: json_problem(v, max_chars=max_chars, what=what))


def json_limits(max_chars: int) -> Documented:
    """What JSON Schema cannot say of a JSON value's size and depth, as
    extensions of the schema (`x-max-json-chars`, `x-max-depth`)."""
    return documented(**{"x-max-json-chars": max_chars, "x-max-depth": MAX_JSON_DEPTH})


TEXT_RULE = rule("text", text_problem)
"""The text rule alone, to put after a type's own constraints."""

Text = Annotated[str, TEXT_RULE, Documented(length=MAX_TEXT_CHARS)]
"""Text that can be stored (no NUL, no lone surrogate): a message's
content, whose size limit is configurable (`Limits`; the schema gives the
default)."""

BoundedText = Annotated[Text, at_most(MAX_TEXT_CHARS, "characters")]
"""Text of at most MAX_TEXT_CHARS characters (prompts, slot text, reasoning)."""

Identifier = Annotated[
    str,
    rule("identifier", lambda v: identifier_problem(v, MAX_ID_CHARS)),
    documented(minLength=1, maxLength=MAX_ID_CHARS),
]
AgentId = Annotated[
    str,
    rule("agent_id", lambda v: identifier_problem(v, MAX_AGENT_ID_CHARS)),
    documented(minLength=1, maxLength=MAX_AGENT_ID_CHARS),
]
SlotName = Annotated[
    str,
    rule("slot_name", slot_name_problem),
    documented(minLength=1, maxLength=MAX_SLOT_NAME_CHARS),
]

Arguments = Annotated[
    dict[str, Any],
    json_object(MAX_ARGUMENTS_CHARS, "the arguments object"),
    json_limits(MAX_ARGUMENTS_CHARS),
]
Metadata = Annotated[
    dict[str, Any], json_object(MAX_METADATA_CHARS, "metadata"), json_limits(MAX_METADATA_CHARS)
]

TokenCount = Annotated[int, Field(strict=True, ge=0, le=MAX_INTEGER)]
Version = Annotated[int, Field(strict=True, ge=0, le=MAX_BIGINT)]
