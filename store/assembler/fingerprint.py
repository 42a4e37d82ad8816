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
"" without tool calls, else the JSON of [[id, name, arguments], ...];
reasoning is "" without reasoning, else the JSON of each block's
`model_dump(mode="json")`; the parts likewise. JSON here is compact (no
whitespace), with sorted keys (Postgres JSONB reorders them) and non-ASCII
kept. Role, kind and the flag never contain LF and everything else is
length-prefixed, so the text reads back one way only: a change to any
provider-visible field, or to the order of the messages, changes the text
and so the fingerprint. Nothing depends on the process (no `hash()`, no
object identity), so the same prefix gives the same fingerprint in any
process.

Message text is hashed as raw UTF-8, never JSON-escaped, and no message is
re-serialised through pydantic: that is what keeps a cold build of a long
conversation cheap. (Version 1 was the sha256 of one sorted-key JSON
document of the format, the system prompt and every prefix message's
`model_dump`; a digest per message, hashed in turn, was measured slower than
feeding one running hash.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from hashlib import sha256
from typing import Any

from pydantic_core import to_jsonable_python

from store.assembler.diagnostics import StablePrefix
from store.messages import Message, ToolCall
from store.tokens import TokenCounter, estimate_messages_tokens

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
# above would miss it: hash the whole provider-visible dump instead.
_EXACT = _PROVIDER_FIELDS == _RECORD_FIELDS and set(ToolCall.model_fields) == {
    "id",
    "name",
    "arguments",
}

_compact = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=to_jsonable_python
).encode


def _json(value: Any) -> str:
    try:
        return _compact(value)
    except TypeError:
        # e.g. mixed-type keys in a nested dict, which sort_keys cannot order.
        return _compact(to_jsonable_python(value))


def _field(text: str | None) -> str:
    return "-" if text is None else f"{len(text)}:{text}"


def message_record(message: Message) -> str:
    """The text one message adds to the fingerprint (see the module docstring)."""
    if not _EXACT:
        dump = message.model_dump(mode="json", include=set(_PROVIDER_FIELDS))
        return "J" + _field(_json(dump))
    kind = message.kind
    try:
        kind_text = kind._value_  # `f"{kind}"` would go through Enum.__format__: slow
    except AttributeError:  # not a MessageKind member (a model_construct'ed message)
        kind_text = str(kind)
    content = message.content
    calls = message.tool_calls
    reasoning = message.reasoning
    call_id = message.tool_call_id
    head = (
        f"{message.role}\n{kind_text}\n{'1' if message.is_error else '0'}\n"
        f"{'-' if call_id is None else f'{len(call_id)}:{call_id}'}\n"
        f"{_field(_json([[c.id, c.name, c.arguments] for c in calls])) if calls else '0:'}\n"
        f"{_field(_json([r.model_dump(mode='json') for r in reasoning])) if reasoning else '0:'}\n"
    )
    if isinstance(content, str):
        return f"{head}s{len(content)}:{content}\n"
    return f"{head}p{_field(_json([p.model_dump(mode='json') for p in content]))}\n"


def fingerprint(*, format: str, system_prompt: str | None, prefix: Sequence[Message]) -> str:
    """The stable-prefix fingerprint (see the module docstring)."""
    digest = sha256(f"{VERSION}\n{_field(format)}\n{_field(system_prompt)}\n".encode())
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
) -> StablePrefix:
    """`costs`: the token estimate of each prefix message, when already known."""
    tokens = sum(estimate_messages_tokens(prefix, count) if costs is None else costs)
    if system_prompt is not None:
        tokens += count(system_prompt)
    return StablePrefix(
        fingerprint=fingerprint(format=format, system_prompt=system_prompt, prefix=prefix),
        tokens=tokens,
        message_count=len(prefix) + (system_prompt is not None),
    )
