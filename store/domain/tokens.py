"""Token estimates: a pluggable counter, an offline approximation by default.

The default is the common "about four characters a token" rule (the same
one langchain's `count_tokens_approximately` uses), plus a small overhead
per message for the role and framing. It needs no network and no model
files; plug in a real tokenizer by passing any `TokenCounter`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from store.domain.json_text import sorted_json
from store.domain.messages import ImagePart, Message

TokenCounter = Callable[[str], int]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 3  # the role and the framing of each message
IMAGE_TOKENS = 85  # a low-detail image in OpenAI's accounting

# json.dumps(..., sort_keys=True), its encoder built once (store.domain.json_text).
_sorted_json = sorted_json()


def approximate_tokens(text: str) -> int:
    """About four characters a token, rounded up: the default counter, and
    the one place the rule is written (the payload build's fast path,
    `store.assembler.plain`, calls it too)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def arguments_text(arguments: dict[str, Any]) -> str:
    """A tool call's arguments as the estimate counts them: JSON, sorted keys."""
    return _sorted_json(arguments)


def estimate_message_tokens(
    message: Message,
    count: TokenCounter = approximate_tokens,
    *,
    arguments: Sequence[str] | None = None,
) -> int:
    """`arguments`: each tool call's `arguments_text`, when the caller has them."""
    content = message.content
    if isinstance(content, str):
        total = MESSAGE_OVERHEAD + count(content)
    else:
        total = MESSAGE_OVERHEAD + count(message.text)
        total += IMAGE_TOKENS * sum(isinstance(p, ImagePart) for p in content)
    for k, call in enumerate(message.tool_calls):
        text = arguments[k] if arguments is not None else _sorted_json(call.arguments)
        total += count(call.name) + count(text)
    for block in message.reasoning:
        total += count(block.text or "")
    return total


def estimate_messages_tokens(
    messages: Iterable[Message], count: TokenCounter = approximate_tokens
) -> list[int]:
    """`estimate_message_tokens` of each message, in order. With the default
    counter a text-only message (most of a window) is costed in the loop
    itself, without the general path's checks and loops."""
    if count is not approximate_tokens:
        return [estimate_message_tokens(m, count) for m in messages]
    return [
        MESSAGE_OVERHEAD + approximate_tokens(content)
        if (content := m.content).__class__ is str and not m.tool_calls and not m.reasoning
        else estimate_message_tokens(m)
        for m in messages
    ]
