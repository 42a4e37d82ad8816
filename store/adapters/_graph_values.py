"""Channel values, metadata and pending writes as JSON the store can keep.

A value that is plain JSON (str, int, finite float, bool, None, lists,
objects with string keys) is kept as itself, `{"j": value}`, readable in
the log and in exports. Anything else (LangChain messages inside other
channels, tuples, bytes, dataclasses, ...) goes through the saver's
serializer (`serde.dumps_typed`) and is kept as `{"t": type, "b": base64}`.
A saver given its own serializer (an encrypting one, say) uses it for
every value: nothing is written in the clear behind its back.

Every decoded value is a fresh copy, as a serializer's would be: LangGraph's
loop changes the checkpoint it read in place (its channel versions, what
each node has seen), and runs reading one checkpoint must not share them,
or one run marking its input seen marks another's too.
"""

from __future__ import annotations

import base64
import math
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

_MAX_DEPTH = 64  # the store's limit for JSON nesting (store.domain.inputs)


def is_plain(value: Any, depth: int = 0) -> bool:
    """Whether `value` comes back as itself from JSON (exact types only: a
    tuple would come back a list, a str subclass a str)."""
    if depth > _MAX_DEPTH:
        return False
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return kind is not int or -(2**63) <= value < 2**63
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(is_plain(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and is_plain(v, depth + 1) for k, v in value.items())
    return False


def plain_copy(value: Any) -> Any:
    """A copy of plain JSON `value`, sharing nothing mutable with it."""
    if type(value) is list:
        return [plain_copy(v) for v in value]
    if type(value) is dict:
        return {k: plain_copy(v) for k, v in value.items()}
    return value


def encode(value: Any, serde: SerializerProtocol, *, plain_json: bool) -> dict[str, Any]:
    if plain_json and is_plain(value):
        return {"j": plain_copy(value)}
    kind, data = serde.dumps_typed(value)
    return {"t": kind, "b": base64.b64encode(data).decode("ascii")}


def decode(stored: dict[str, Any], serde: SerializerProtocol) -> Any:
    if "j" in stored:
        return plain_copy(stored["j"])
    return serde.loads_typed((stored["t"], base64.b64decode(stored["b"])))
