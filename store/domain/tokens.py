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

MESSAGE_OVERHEAD = 3
IMAGE_TOKENS = 85  # a low-detail image in OpenAI's accounting

# json.dumps(..., sort_keys=True), its encoder built once (store.domain.json_text).
_sorted_json = sorted_json()


def approximate_tokens(text: str) -> int:
    """About four characters a token, rounded up."""
    return (len(text) + 3) // 4


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


def _approximate_message_tokens(message: Message) -> int:
    """`estimate_message_tokens(message, approximate_tokens)`, the counter inlined."""
    content = message.content
    if content.__class__ is not str:
        return estimate_message_tokens(message)
    total = MESSAGE_OVERHEAD + (len(content) + 3) // 4
    for call in message.tool_calls:
        total += (len(call.name) + 3) // 4 + (len(_sorted_json(call.arguments)) + 3) // 4
    for block in message.reasoning:
        total += (len(block.text or "") + 3) // 4
    return total


def estimate_messages_tokens(
    messages: Iterable[Message], count: TokenCounter = approximate_tokens
) -> list[int]:
    """`estimate_message_tokens` of each message, in order (the default counter's
    arithmetic done inline)."""
    if count is not approximate_tokens:
        return [estimate_message_tokens(m, count) for m in messages]
    return [
        MESSAGE_OVERHEAD + (len(content) + 3) // 4
        if (content := m.content).__class__ is str and not m.tool_calls and not m.reasoning
        else _approximate_message_tokens(m)
        for m in messages
    ]
