"""Messages as the log stores them, and back, without validating twice.

A message is validated once, on the way in (`store.domain.validation`). The log
keeps its JSON compactly: top-level fields at their default are left out
(the model restores them). `role` is always kept; `kind` is left out only
when it is its role's default (`input` for a user message, else `output`),
a rule fixed here, in the stored format (`STORED_DEFAULT_KIND`), not taken
from the model: should the model's default ever change, what the log says
stays what it meant (docs/storage.md, "What went").

On the way out, stored JSON becomes `Message`/`StoredMessage` values by
construction, not validation: the log only holds what was valid when it
was written, and re-validating every row would be most of the cost of
reading a long window (figures: docs/storage.md, "Why the hot paths are
written by hand").
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel

from store.domain.messages import (
    MAIN_AGENT,
    ContentPart,
    ImagePart,
    Message,
    MessageKind,
    Reasoning,
    StoredMessage,
    TextPart,
    ToolCall,
)

# Top-level fields a stored message may leave out, with the value a reader
# restores: part of the log's format, like `STORED_DEFAULT_KIND`. Nested
# values (parts, calls, reasoning) are kept whole. Decoding restores them
# all at once (`_fields`); code that reads the stored JSON itself, without
# decoding it (the payload build's fast path, `store.assembler.plain`, and
# the fingerprint of stored rows), reads a field with `stored_field`, or in
# a loop over rows with the defaults `stored_defaults` gives.
STORED_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "content": "",
        "tool_calls": (),
        "tool_call_id": None,
        "is_error": False,
        "reasoning": (),
        "agent_id": MAIN_AGENT,
        "client_message_id": None,
        "token_estimate": None,
        "metadata": MappingProxyType({}),
    }
)


def stored_field(data: Mapping[str, Any], name: str) -> Any:
    """Top-level field `name` of a stored message's JSON (`data`): its value,
    or the default the log left it out at (`STORED_DEFAULTS`)."""
    return data.get(name, STORED_DEFAULTS[name])


def stored_defaults(*names: str) -> tuple[Any, ...]:
    """The defaults of the fields `names`, for a loop over many rows that
    reads each one as `data.get(name, default)`: `stored_field`'s value
    without a call and a look-up per field of every row."""
    return tuple(STORED_DEFAULTS[name] for name in names)


def stored_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """A stored tool call's arguments: a reader restores empty ones."""
    arguments: dict[str, Any] = call.get("arguments", {})
    return arguments


_KINDS = {kind.value: kind for kind in MessageKind}

# The kind a stored message without one has, by role: part of the log's
# format (above). Events written before it always name their kind.
STORED_DEFAULT_KIND: dict[str, MessageKind] = {
    "system": MessageKind.OUTPUT,
    "user": MessageKind.INPUT,
    "assistant": MessageKind.OUTPUT,
    "tool": MessageKind.OUTPUT,
}

M = TypeVar("M", bound=BaseModel)


_FIELDS_SET: dict[type[BaseModel], set[str]] = {}


def _fields_set(cls: type[BaseModel]) -> set[str]:
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None:
        fields_set = _FIELDS_SET[cls] = set(cls.model_fields)
    return fields_set


def _slot_setter(name: str) -> Callable[[BaseModel, Any], None]:
    """The setter of `BaseModel`'s slot `name`, called directly rather than
    through `object.__setattr__`, which looks the name up along the
    instance's class at every call (measured: docs/storage.md, "Why the hot
    paths are written by hand")."""
    setter: Callable[[BaseModel, Any], None] = vars(BaseModel)[name].__set__
    return setter


# What `model_construct` sets on every instance besides its fields.
_SET_DICT = _slot_setter("__dict__")
_SET_FIELDS_SET = _slot_setter("__pydantic_fields_set__")
_SET_EXTRA = _slot_setter("__pydantic_extra__")
_SET_PRIVATE = _slot_setter("__pydantic_private__")


def _build(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of `cls` holding `values` (every field, in order), as
    `model_construct` builds one but without its per-field bookkeeping,
    which would be most of the cost of a long read. (The fields-set is
    shared per class: frozen models never change it, and a copy copies it.)"""
    instance = cls.__new__(cls)
    _SET_DICT(instance, values)
    _SET_FIELDS_SET(instance, _fields_set(cls))
    _SET_EXTRA(instance, None)
    _SET_PRIVATE(instance, None)
    return instance


_MESSAGE_FIELDS: set[str] = set(Message.model_fields)  # not changed by model_dump
# A plain message's fields in the model's order, its (empty) reasoning left
# out: what `_encode_plain` spells out (`tests/unit/test_codec.py` checks
# that this is every field of `Message` but reasoning).
PLAIN_FIELDS = (
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "is_error",
    "agent_id",
    "kind",
    "client_message_id",
    "token_estimate",
    "metadata",
)


def encode_message(message: Message) -> dict[str, Any]:
    """The JSON the log keeps for `message`: defaults left out."""
    fields = message.__dict__
    if fields["content"].__class__ is str and not fields["reasoning"]:
        return _encode_plain(fields)
    data = message.model_dump(mode="json", include=_MESSAGE_FIELDS)
    if STORED_DEFAULT_KIND[message.role] == message.kind:
        del data["kind"]
    left_out = STORED_DEFAULTS
    return {k: v for k, v in data.items() if k not in left_out or fields[k] != left_out[k]}


def _encode_plain(fields: dict[str, Any]) -> dict[str, Any]:
    """`encode_message` of a message with text content and no reasoning
    (every message but a few assistant turns), read off its fields: the
    same JSON, key for key and in the same order (`PLAIN_FIELDS`), each
    left out at its `STORED_DEFAULTS` value. Its only nested models are tool
    calls, of three JSON fields, so pydantic's serializer (with the
    `include` filter, a large share of the client's time in an append) is
    not needed; and the fields are spelled out rather than looped over with
    the defaults table, which took twice as long (measured: docs/storage.md,
    "Why the hot paths are written by hand").
    `tests/unit/test_codec.py` holds the two paths equal."""
    data: dict[str, Any] = {"role": fields["role"]}
    if content := fields["content"]:
        data["content"] = content
    if calls := fields["tool_calls"]:
        data["tool_calls"] = [_encode_call(call.__dict__) for call in calls]
    if (call_id := fields["tool_call_id"]) is not None:
        data["tool_call_id"] = call_id
    if fields["is_error"]:
        data["is_error"] = True
    if (agent_id := fields["agent_id"]) != MAIN_AGENT:
        data["agent_id"] = agent_id
    if (kind := fields["kind"]) is not STORED_DEFAULT_KIND[fields["role"]]:
        data["kind"] = kind.value
    if (client_id := fields["client_message_id"]) is not None:
        data["client_message_id"] = client_id
    if (tokens := fields["token_estimate"]) is not None:
        data["token_estimate"] = tokens
    if metadata := fields["metadata"]:
        # The metadata is the message's own object: the event gets a copy.
        data["metadata"] = dict(metadata)
    return data


def _encode_call(fields: dict[str, Any]) -> dict[str, Any]:
    # Validated arguments are JSON as they stand (store.domain.inputs.json_problem);
    # the event gets its own copy of the caller's object, as metadata does.
    return {"id": fields["id"], "name": fields["name"], "arguments": dict(fields["arguments"])}


def with_kind(data: dict[str, Any]) -> dict[str, Any]:
    """A stored message's JSON (`data`, changed in place) naming its kind,
    as readers of the raw log (the feed, raw exports) are shown it."""
    if "kind" not in data:
        data["kind"] = stored_kind(data)
    return data


def without_default_kind(data: dict[str, Any]) -> dict[str, Any]:
    """A message's JSON as the log stores it: `with_kind` undone (changed in
    place), for an event put back as it was recorded."""
    if data.get("kind") == STORED_DEFAULT_KIND[data["role"]].value:
        del data["kind"]
    return data


def stored_kind(data: Mapping[str, Any]) -> str:
    """A stored message's kind, its role's default when the log left it out."""
    kind: str | None = data.get("kind")
    return kind or STORED_DEFAULT_KIND[data["role"]].value


def _part(raw: Mapping[str, Any]) -> ContentPart:
    if raw["type"] == "text":
        return _build(TextPart, {"type": "text", "text": raw["text"]})
    return _build(
        ImagePart,
        {
            "type": "image",
            "url": raw.get("url"),
            "data": raw.get("data"),
            "media_type": raw.get("media_type"),
        },
    )


def _reasoning(raw: Mapping[str, Any]) -> Reasoning:
    return _build(
        Reasoning,
        {
            "provider": raw["provider"],
            "text": raw.get("text"),
            "signature": raw.get("signature"),
            "data": raw.get("data"),
            "item_id": raw.get("item_id"),
            "redacted": raw.get("redacted", False),
        },
    )


# Every field of a Message, in declaration order, at its default: a decoded
# message starts as a copy of this (one C-level copy and update, rather
# than a Python call per field).
_MESSAGE_DEFAULTS: dict[str, Any] = {
    name: STORED_DEFAULTS.get(name) for name in Message.model_fields
}


# A StoredMessage's: the same, then its own fields, which the reader sets.
_STORED_DEFAULTS: dict[str, Any] = {
    **_MESSAGE_DEFAULTS,
    **{name: None for name in StoredMessage.model_fields if name not in _MESSAGE_DEFAULTS},
}


def _fields(
    data: Mapping[str, Any], content: Any, defaults: dict[str, Any] = _MESSAGE_DEFAULTS
) -> dict[str, Any]:
    values = defaults.copy()
    values.update(data)
    kind = values["kind"]
    values["kind"] = STORED_DEFAULT_KIND[values["role"]] if kind is None else _KINDS[kind]
    if content is not None:
        values["content"] = content
    if values["content"].__class__ is not str:
        values["content"] = tuple(map(_part, values["content"]))
    # Absent from `data` (the usual case), the defaults' empty tuples stand.
    if "tool_calls" in data:
        values["tool_calls"] = tuple(
            _build(ToolCall, {"id": c["id"], "name": c["name"], "arguments": stored_arguments(c)})
            for c in data["tool_calls"]
        )
    if "reasoning" in data:
        values["reasoning"] = tuple(map(_reasoning, data["reasoning"]))
    if "metadata" not in data:
        values["metadata"] = {}  # each message its own, as pydantic's default_factory
    return values


@contextmanager
def collector_paused() -> Iterator[None]:
    """Around decoding many rows at once, or building a payload from them:
    no garbage collection meanwhile.

    A long window allocates tens of thousands of small objects and no
    reference cycles; the collector's passes over them took a large share
    of the decoding time (docs/storage.md, "Why the hot paths are written
    by hand") and collected nothing. It runs again afterwards.

    Its first pass afterwards walks every object made meanwhile that is
    still alive, so a read holds one pause from its rows to the values it
    returns, and drops the rows inside it (`PostgresStorage._read_into`):
    paused around the fetch alone, a long build's passes walked the rows
    too. A pause never spans a query or a wait for a connection
    (the collector would be off for the whole process meanwhile). Nested
    pauses are one.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def decode_message(data: Mapping[str, Any], *, content: Any = None) -> Message:
    """A `Message` from stored JSON (`content`: an edit's content, if any)."""
    return _build(Message, _fields(data, content))


def _instances(cls: type[M], values: Iterable[dict[str, Any]]) -> list[M]:
    """`_build(cls, v)` of each of `values`, in one loop, without the
    collector running: a call per message and a look-up of the class's
    fields-set per message would be paid by every message of a window."""
    new, fields_set = cls.__new__, _fields_set(cls)
    set_dict, set_fields_set, set_extra, set_private = (
        _SET_DICT,
        _SET_FIELDS_SET,
        _SET_EXTRA,
        _SET_PRIVATE,
    )
    instances: list[M] = []
    append = instances.append
    with collector_paused():
        for fields in values:
            instance = new(cls)
            set_dict(instance, fields)
            set_fields_set(instance, fields_set)
            set_extra(instance, None)
            set_private(instance, None)
            append(instance)
    return instances


def decode_row(row: Sequence[Any]) -> Message:
    """One row of a window (as `decode_window` reads them) as a `Message`."""
    return _build(
        Message, _fields(row[0]["message"], None) if row[1] is None else _edited(*row[:2])
    )


@dataclass(frozen=True)
class StoredWindow:
    """A window as the log keeps it: per message, in window order, a row
    that starts (the message's event JSON, its latest edit's event JSON or
    None). What a payload build reads: most builds render the rows' JSON
    without making a `Message` of each (`store.assembler.plain`); the others
    decode them (`messages`).

    A storage's rows go on with what names those two values for good: the
    appending event's position in the log and the edit's version (0: none),
    by which `store.assembler.prefix_cache` knows a message it hashed
    before."""

    rows: Sequence[Sequence[Any]]

    def messages(self) -> list[Message]:
        return decode_window(self.rows)


def decode_window(rows: Iterable[Sequence[Any]]) -> list[Message]:
    """The window's messages from rows that start (the message's event
    JSON, its latest edit's event JSON or None), as the assembler reads
    them (`store.postgres.window_sql.ASSEMBLY_WINDOW`). The fields of all of them
    are made in one comprehension, then the instances in one loop: a
    generator per layer (rows to bodies to fields) made decoding measurably
    slower (docs/storage.md, "Why the hot paths are written by hand")."""
    return _instances(
        Message,
        [
            _fields(row[0]["message"], None) if row[1] is None else _edited(row[0], row[1])
            for row in rows
        ],
    )


def _edited(appended: Mapping[str, Any], edit: Mapping[str, Any]) -> dict[str, Any]:
    """An edited message's fields: the edit's content, and its token
    estimate rather than the original's."""
    values = _fields(appended["message"], edit["content"])
    values["token_estimate"] = edit.get("token_estimate")
    return values


def decode_stored(
    data: Mapping[str, Any],
    *,
    seq: int,
    batch: int,
    role_ordinal: int,
    recorded_at: datetime | None,
    edited_content: Any = None,
    token_estimate: int | None = None,
    pinned: bool = False,
) -> StoredMessage:
    """A `StoredMessage` from stored JSON and its row's columns.

    An edited message carries the edit's content and token estimate.
    """
    edit = None if edited_content is None else {"content": edited_content}
    row = (seq, batch, role_ordinal, token_estimate, recorded_at, {"message": data}, edit, pinned)
    return decode_stored_rows((row,))[0]


def decode_stored_rows(rows: Iterable[Sequence[Any]]) -> list[StoredMessage]:
    """`StoredMessage`s from rows that start (seq, batch, role_ordinal,
    token_estimate, recorded_at, the message's event JSON, its latest
    edit's event JSON or None, pinned), as `store.postgres.shared_sql.
    MESSAGE_COLUMNS` reads them."""
    return _instances(StoredMessage, map(_stored_fields, rows))


def _stored_fields(row: Sequence[Any]) -> dict[str, Any]:
    seq, batch, ordinal, tokens, recorded_at, appended, edit, pinned, *_ = row
    if edit is None:
        values = _fields(appended["message"], None, _STORED_DEFAULTS)
        values["edited"] = False
    else:
        values = _fields(appended["message"], edit["content"], _STORED_DEFAULTS)
        values["token_estimate"] = tokens
        values["edited"] = True
    values["seq"] = seq
    values["batch"] = batch
    values["role_ordinal"] = ordinal
    values["recorded_at"] = recorded_at
    values["pinned"] = pinned
    return values


def stored_from(
    message: Message, *, seq: int, batch: int, role_ordinal: int, recorded_at: datetime
) -> StoredMessage:
    """A just-appended `message` as stored (it was validated on the way in)."""
    values = message.__dict__.copy()
    values.update(
        seq=seq,
        batch=batch,
        role_ordinal=role_ordinal,
        recorded_at=recorded_at,
        edited=False,
        pinned=False,
    )
    return _build(StoredMessage, values)


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of `cls` holding `values` (every field, in declaration
    order), built as decoded messages are (`_build`), without validation:
    only for values the store computed itself from what it had validated
    (a decided event's numbers and its already-valid message)."""
    return _build(cls, values)


def with_fields(message: M, **fields: Any) -> M:
    """A copy of a validated `message` with `fields` changed, for values the
    store computed itself (a token estimate): `model_copy(update=...)`
    without pydantic's copy protocol, which an append would pay per message."""
    values = message.__dict__.copy()
    values.update(fields)
    return _build(type(message), values)


def message_text(data: Mapping[str, Any], content: Any = None) -> str:
    """A stored message's text (`Message.text`), without building the message."""
    if content is None:
        content = stored_field(data, "content")
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")
