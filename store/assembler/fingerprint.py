"""The stable prefix: everything before the special block, which a provider's
prefix cache can reuse from one build to the next.

The fingerprint (definition version 2) is the sha256, as hex, of one text
fed message by message, each message read once:

    header record(m1) record(m2) ... record(mn)      (UTF-8, concatenated)

over the neutral messages before the special block, as the provider will see
them: only the provider-visible fields count (role, kind, is_error,
tool_call_id, tool_calls, reasoning, content); bookkeeping such as token
estimates, client ids, metadata, the agent id, and a StoredMessage's seq,
batch and timestamps does not. With LF a line feed:

    header = "convo-store/stable-prefix/2" LF F(format) LF F(system prompt) LF
    record = role LF kind LF ("1" if is_error else "0") LF F(tool_call_id) LF
             F(calls) LF F(reasoning) LF body LF
    body   = "s" F(text)                when the content is a string
           | "p" F(JSON of the parts)   when it is a list of parts

where F(None) is "-" and F(s) is len(s) (in code points) ":" s; calls is
"" without tool calls, else F(id) F(name) F(arguments) of each call, in
order, the arguments as `store.domain.tokens.arguments_text` writes them
(`json.dumps(arguments, sort_keys=True)`, the text the token estimate
counts); reasoning is "" without reasoning, else the compact JSON (no
whitespace, sorted keys, non-ASCII kept) of the list of each block's
`model_dump(mode="json")`; the parts likewise. Keys are sorted because
Postgres JSONB reorders them. Role, kind and the flag never contain LF and
everything else is length-prefixed, so the text reads back one way only: a
change to any provider-visible field, or to the order of the messages,
changes the text and so the fingerprint. Nothing depends on the process (no
`hash()`, no object identity), so the same prefix gives the same
fingerprint in any process.

Message text is hashed as raw UTF-8, never JSON-escaped, and no message is
re-serialised through pydantic: that is what keeps a cold build of a long
conversation cheap. (Version 1 was the sha256 of one sorted-key JSON
document of the format, the system prompt and every prefix message's
`model_dump`; a digest per message, hashed in turn, is slower than feeding
one running hash.)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from hashlib import sha256
from typing import TYPE_CHECKING, Any

from store.assembler.diagnostics import StablePrefix
from store.domain.codec import (
    decode_row,
    decode_window,
    stored_arguments,
    stored_defaults,
    stored_kind,
)
from store.domain.json_text import sorted_json
from store.domain.messages import Message, ToolCall
from store.domain.tokens import TokenCounter, arguments_text, estimate_messages_tokens

if TYPE_CHECKING:
    from hashlib import _Hash as Hash

VERSION = "convo-store/stable-prefix/2"

# Only what a provider sees: a StoredMessage's seq, batch and timestamps (and
# our own bookkeeping) must not change the fingerprint of the same content.
_PROVIDER_FIELDS = frozenset(Message.model_fields) - {
    "token_estimate",
    "client_message_id",
    "metadata",
    "agent_id",
}
_RECORD_FIELDS = frozenset(
    {"role", "kind", "is_error", "tool_call_id", "tool_calls", "reasoning", "content"}
)
# Should a provider-visible field be added to Message or ToolCall, the record
# above would miss it: hash the whole provider-visible dump instead (and
# `feed_rows`, which reads the stored JSON field by field, is not used).
EXACT = _PROVIDER_FIELDS == _RECORD_FIELDS and set(ToolCall.model_fields) == {
    "id",
    "name",
    "arguments",
}

_json = sorted_json(ensure_ascii=False, separators=(",", ":"))


def _field(text: str | None) -> str:
    return "-" if text is None else f"{len(text)}:{text}"


def _dumps(values: Sequence[Any]) -> str:
    return _field(_json([value.model_dump(mode="json") for value in values]))


def _lead(message: Message) -> str:
    """A record's first three lines: role, kind, flag."""
    kind = message.kind
    try:
        kind_text = kind._value_  # `f"{kind}"` would go through Enum.__format__: slow
    except AttributeError:  # not a MessageKind member (a model_construct'ed message)
        kind_text = str(kind)
    return f"{message.role}\n{kind_text}\n{'1' if message.is_error else '0'}\n"


def _head(message: Message, calls_field: str, reasoning_field: str) -> str:
    """A record up to its body: role, kind, flag, call id, calls, reasoning."""
    return f"{_lead(message)}{_field(message.tool_call_id)}\n{calls_field}\n{reasoning_field}\n"


def _call_text(call: ToolCall, arguments: str) -> str:
    return f"{len(call.id)}:{call.id}{len(call.name)}:{call.name}{len(arguments)}:{arguments}"


def _calls_field(calls: Sequence[ToolCall], texts: Sequence[str]) -> str:
    """F(calls): each call's F(id) F(name) F(arguments), `texts` its arguments."""
    if len(calls) == 1:  # the usual case, without a join
        return _field(_call_text(calls[0], texts[0]))
    return _field("".join(map(_call_text, calls, texts)))


def message_record(message: Message, arguments: Sequence[str] | None = None) -> str:
    """The text one message adds to the fingerprint (see the module docstring).

    `arguments`: each tool call's `arguments_text`, when already computed.
    """
    if not EXACT:
        return "J" + _field(_json(message.model_dump(mode="json", include=set(_PROVIDER_FIELDS))))
    content = message.content
    calls = message.tool_calls
    if calls:
        texts = arguments if arguments is not None else [arguments_text(c.arguments) for c in calls]
        calls_field = _calls_field(calls, texts)
    else:
        calls_field = "0:"
    head = _head(message, calls_field, _dumps(message.reasoning) if message.reasoning else "0:")
    if isinstance(content, str):
        return f"{head}s{len(content)}:{content}\n"
    return f"{head}p{_dumps(content)}\n"


def _plain_parts(message: Message) -> tuple[str, str]:
    """The record of a message with string content, no tool calls and no
    reasoning, up to the body's length, in two parts: before its tool call
    id and after it. Both are the same for every such message of one role,
    kind and error flag (a tool result's call id is its own), so the head
    of each is not built anew (docs/assembler.md, "What the fingerprint
    and the renderers cost")."""
    return _lead(message), "\n0:\n0:\ns"


def _header(format: str, system_prompt: str | None) -> bytes:
    return f"{VERSION}\n{_field(format)}\n{_field(system_prompt)}\n".encode()


def fingerprint(*, format: str, system_prompt: str | None, prefix: Sequence[Message]) -> str:
    """The stable-prefix fingerprint (see the module docstring)."""
    digest = sha256(_header(format, system_prompt))
    update = digest.update
    for message in prefix:
        update(message_record(message).encode())
    return digest.hexdigest()


def stable_prefix(
    *,
    format: str,
    system_prompt: str | None,
    prefix: Sequence[Message],
    count: TokenCounter,
    costs: Sequence[int] | None = None,
) -> tuple[StablePrefix, int]:
    """The stable prefix, and the summed token estimate of its messages.

    The token estimate is made now (`costs`: each prefix message's, when
    already known); the fingerprint when it is first read
    (`StablePrefix.fingerprint`): hashing every message's text is a large
    share of a payload build (docs/assembler.md, "What the fingerprint and
    the renderers cost"), for a value a caller that sends the payload and
    nothing else never reads. The prefix is a tuple of frozen messages, so
    the value read later is the value of the build.
    """
    messages = tuple(prefix)
    message_tokens = sum(costs if costs is not None else estimate_messages_tokens(messages, count))
    tokens = message_tokens
    if system_prompt is not None:
        tokens += count(system_prompt)
    return (
        StablePrefix.of(
            functools.partial(_digest, format, system_prompt, messages),
            tokens=tokens,
            message_count=len(messages) + (system_prompt is not None),
        ),
        message_tokens,
    )


def digest_rows(format: str, system_prompt: str | None, rows: Sequence[Sequence[Any]]) -> str:
    """`fingerprint(...)` of the messages stored as `rows` (each starts with
    the message's event JSON and its latest edit's or None, as
    `store.domain.codec.StoredWindow` holds them), read off the JSON: the same
    text, without making a `Message` of each row, which would cost more
    than the hashing (store.assembler.plain). A row with parts or reasoning, whose record
    needs their models' full JSON, is decoded."""
    if not EXACT:
        return _digest(format, system_prompt, decode_window(rows))
    digest = prefix_hash(format, system_prompt)
    feed_rows(digest, rows)
    return digest.hexdigest()


def prefix_hash(format: str, system_prompt: str | None) -> Hash:
    """The running hash of a prefix of no message yet: its header fed."""
    return sha256(_header(format, system_prompt))


def feed_rows(digest: Hash, rows: Sequence[Sequence[Any]]) -> None:
    """Feed `digest` the records of the messages stored as `rows`, in order
    (`digest_rows`'s loop, for a hash that already holds the records of the
    messages before them: `store.assembler.prefix_cache`). Only while the
    records are exact (`EXACT`); else `digest_rows` decodes the rows."""
    update = digest.update
    field = _field
    no_content, no_reasoning, no_calls, no_error, no_call_id = stored_defaults(
        "content", "reasoning", "tool_calls", "is_error", "tool_call_id"
    )
    for row in rows:
        message, edit = row[0]["message"], row[1]
        content = message.get("content", no_content) if edit is None else edit["content"]
        if content.__class__ is not str or message.get("reasoning", no_reasoning):
            update(message_record(decode_row(row)).encode())
            continue
        role = message["role"]
        kind = stored_kind(message)
        calls = message.get("tool_calls", no_calls)
        if calls:
            calls_field = field(
                "".join(
                    f"{len(c['id'])}:{c['id']}{len(c['name'])}:{c['name']}{len(text)}:{text}"
                    for c in calls
                    for text in (arguments_text(stored_arguments(c)),)
                )
            )
        else:
            calls_field = "0:"
        update(
            f"{role}\n{kind}\n{'1' if message.get('is_error', no_error) else '0'}\n"
            f"{field(message.get('tool_call_id', no_call_id))}\n{calls_field}\n0:\n"
            f"s{len(content)}:{content}\n".encode()
        )


def _digest(format: str, system_prompt: str | None, prefix: Sequence[Message]) -> str:
    """`fingerprint(...)`, in one pass written for speed: the same text."""
    digest = sha256(_header(format, system_prompt))
    update = digest.update
    # The records of plain messages (string content, no calls, no reasoning:
    # most of a conversation) differ only after their heads, which are made
    # once per role, kind, flag and call id, rather than field by field for
    # every message (docs/assembler.md, "What the fingerprint and the
    # renderers cost").
    heads: dict[tuple[Any, ...], tuple[str, str]] = {}
    exact = EXACT
    for message in prefix:
        # A model's fields live in its __dict__: read from it, the look-ups
        # are cheaper than attribute reads.
        fields = message.__dict__
        content = fields["content"]
        if not exact or content.__class__ is not str or fields["reasoning"]:
            update(message_record(message).encode())
            continue
        # String content, no reasoning: most of a conversation. The record
        # is written here in one piece (see `message_record`).
        key = (fields["role"], fields["kind"], fields["is_error"])
        parts = heads.get(key)
        if parts is None:
            parts = heads[key] = _plain_parts(message)
        calls = fields["tool_calls"]
        if calls:
            texts = [arguments_text(call.arguments) for call in calls]
            after = f"\n{_calls_field(calls, texts)}\n0:\ns"
        else:
            after = parts[1]
        call_id = fields["tool_call_id"]
        update(
            f"{parts[0]}{'-' if call_id is None else f'{len(call_id)}:{call_id}'}"
            f"{after}{len(content)}:{content}\n".encode()
        )
    return digest.hexdigest()
