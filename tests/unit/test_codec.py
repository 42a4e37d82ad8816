"""store.domain.codec: what the log keeps of a message, and the message it gives back.

Reads build messages without validating them again, so the property that
matters is exact: any valid message, encoded and decoded, is the same
message — equal, with the same JSON and the same field order.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from store.domain.codec import (
    PLAIN_FIELDS,
    STORED_DEFAULT_KIND,
    STORED_DEFAULTS,
    decode_message,
    decode_stored,
    encode_message,
    message_text,
    stored_arguments,
    stored_defaults,
    stored_field,
    stored_kind,
    with_kind,
)
from store.domain.events import MessageAppended, from_data
from store.domain.messages import (
    ROLES,
    ImagePart,
    Message,
    MessageKind,
    Reasoning,
    Role,
    TextPart,
    ToolCall,
)

text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(
    str.strip
)
ids = st.text(string.ascii_letters + string.digits + "_-:.", min_size=1, max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
parts = st.lists(
    st.one_of(
        st.builds(TextPart, text=text),
        st.builds(ImagePart, url=st.just("https://example.com/a.png")),
        st.builds(ImagePart, data=st.just("aGk="), media_type=st.just("image/png")),
    ),
    min_size=1,
    max_size=3,
).map(tuple)
calls = st.lists(
    st.builds(ToolCall, id=ids, name=ids, arguments=st.dictionaries(text, json_values)),
    max_size=3,
    unique_by=lambda c: c.id,
).map(tuple)
reasoning = st.lists(
    st.builds(
        Reasoning,
        provider=st.sampled_from(["anthropic", "openai", "gemini"]),
        text=st.none() | text,
        signature=st.none() | text,
        redacted=st.booleans(),
    ),
    max_size=2,
).map(tuple)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    fields: dict[str, object] = {
        "role": role,
        "content": draw(text | parts),
        "agent_id": draw(st.sampled_from(["main", "helper"])),
        "kind": draw(st.sampled_from(list(MessageKind))),
        "client_message_id": draw(st.none() | ids),
        "token_estimate": draw(st.none() | st.integers(0, 10_000)),
        "metadata": draw(st.dictionaries(text, json_values, max_size=2)),
    }
    if role == "assistant":
        fields["tool_calls"] = draw(calls)
        fields["reasoning"] = draw(reasoning)
    if role == "tool":
        fields["tool_call_id"] = draw(ids)
        fields["is_error"] = draw(st.booleans())
    return Message.model_validate(fields)


def _dumped(message: Message) -> dict[str, object]:
    """The stored JSON by its definition: pydantic's JSON dump, the role's
    default kind and the top-level defaults left out."""
    data = message.model_dump(mode="json")
    if STORED_DEFAULT_KIND[message.role] == message.kind:
        del data["kind"]
    defaults = Message.model_construct(role=message.role).model_dump(mode="json")
    return {k: v for k, v in data.items() if k in ("role", "kind") or defaults.get(k) != v}


def test_the_plain_encoding_spells_out_every_field_but_reasoning() -> None:
    # A field added to Message must be added to codec._encode_plain too.
    assert tuple(name for name in Message.model_fields if name != "reasoning") == PLAIN_FIELDS


@given(messages())
def test_the_stored_json_is_the_dump_without_defaults_key_for_key(message: Message) -> None:
    # Plain messages are encoded off their fields (store.domain.codec._encode_plain),
    # the rest through pydantic: both give the definition, in field order.
    encoded = encode_message(message)
    assert encoded == _dumped(message)
    assert list(encoded) == list(_dumped(message))
    assert json.dumps(encoded) == json.dumps(_dumped(message))


@given(messages())
def test_a_message_survives_the_log(message: Message) -> None:
    # Through JSON, as the log stores it.
    stored = json.loads(json.dumps(encode_message(message)))
    decoded = decode_message(stored)
    assert decoded == message
    assert decoded.model_dump_json() == message.model_dump_json()
    assert list(decoded.__dict__) == list(message.__dict__)
    assert message_text(stored) == message.text


def _as_json(value: object) -> object:
    """A field's value as JSON holds it: tuples and read-only mappings as
    lists and dicts, models dumped."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: object) -> object:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(type(value))


@given(messages())
def test_reading_the_stored_json_gives_what_decoding_restores(message: Message) -> None:
    # The fast paths read the rows' JSON without decoding it
    # (store.assembler.plain, the fingerprint of stored rows): a field left
    # out must read as the value decoding restores, for every field.
    stored = json.loads(json.dumps(encode_message(message)))
    decoded = decode_message(stored)
    for name in STORED_DEFAULTS:
        assert _as_json(stored_field(stored, name)) == _as_json(getattr(decoded, name)), name
    assert stored_defaults(*STORED_DEFAULTS) == tuple(stored_field({}, n) for n in STORED_DEFAULTS)
    assert stored_kind(stored) == decoded.kind.value
    for call, read in zip(stored.get("tool_calls", ()), decoded.tool_calls, strict=True):
        assert stored_arguments(call) == read.arguments


def test_the_stored_defaults_are_the_models_defaults() -> None:
    # A field at the model's default is left out of the log (the definition
    # `_dumped` spells): it must read back as that default.
    defaults = Message.model_construct(role="user")
    for name, default in STORED_DEFAULTS.items():
        assert _as_json(getattr(defaults, name)) == _as_json(default), name
    assert stored_arguments({"id": "c", "name": "n"}) == {}


@given(messages(), text | parts)
def test_an_edited_message_carries_the_edit(message: Message, content: object) -> None:
    stored = json.loads(json.dumps(encode_message(message)))
    edit = json.loads(json.dumps(Message(role="user", content=content).model_dump(mode="json")))
    decoded = decode_stored(
        stored,
        seq=3,
        batch=1,
        role_ordinal=2,
        recorded_at=None,
        edited_content=edit["content"],
        token_estimate=7,
    )
    assert decoded.edited
    assert decoded.token_estimate == 7
    assert decoded.as_message() == message.model_copy(
        update={"content": Message(role="user", content=content).content, "token_estimate": 7}
    )


def test_defaults_are_left_out_and_so_is_a_roles_default_kind() -> None:
    message = Message(role="user", content="hi")
    assert encode_message(message) == {"role": "user", "content": "hi"}
    assert decode_message(encode_message(message)).kind is MessageKind.INPUT
    # A user message is "input" unless said otherwise: an explicit "output"
    # is kept, and survives.
    output = Message(role="user", content="hi", kind=MessageKind.OUTPUT)
    assert encode_message(output)["kind"] == "output"
    assert decode_message(encode_message(output)).kind is MessageKind.OUTPUT


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("kind", list(MessageKind))
def test_every_role_and_kind_round_trips(role: Role, kind: MessageKind) -> None:
    call_id = "call_1" if role == "tool" else None
    message = Message(role=role, content="x", kind=kind, tool_call_id=call_id)
    assert decode_message(encode_message(message)).kind is kind
    # The stored format's default is the model's own, for every role.
    assert STORED_DEFAULT_KIND[role] is Message(role=role, content="x", tool_call_id=call_id).kind


def test_events_written_before_the_kind_was_left_out_still_read() -> None:
    assert decode_message({"role": "user", "content": "hi", "kind": "input"}).kind is (
        MessageKind.INPUT
    )
    assert with_kind({"role": "assistant", "content": "hi"})["kind"] == "output"
    assert with_kind({"role": "user", "content": "hi", "kind": "reminder"})["kind"] == "reminder"


def test_a_replayed_event_takes_the_stored_formats_kind() -> None:
    """Replay (`store.domain.events.from_data`) reads a left-out kind by the stored
    format's rule, not by whatever the model's default is."""
    message = {"role": "user", "content": "hi"}
    event = from_data("message_appended", {"seq": 1, "batch": 1, "message": message})
    assert isinstance(event, MessageAppended)
    assert event.message.kind is MessageKind.INPUT
    assert "kind" not in message  # the row read is left as it was
