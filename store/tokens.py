"""Token estimates: a pluggable counter, an offline approximation by default.

The default is the common "about four characters a token" rule (the same
one langchain's `count_tokens_approximately` uses), plus a small overhead
per message for the role and framing. It needs no network and no model
files; plug in a real tokenizer by passing any `TokenCounter`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from store.messages import ImagePart, Message

TokenCounter = Callable[[str], int]

MESSAGE_OVERHEAD = 3
IMAGE_TOKENS = 85  # a low-detail image in OpenAI's accounting


def approximate_tokens(text: str) -> int:
    """About four characters a token, rounded up."""
    return (len(text) + 3) // 4


def estimate_message_tokens(message: Message, count: TokenCounter = approximate_tokens) -> int:
    total = MESSAGE_OVERHEAD + count(message.text)
    if not isinstance(message.content, str):
        total += IMAGE_TOKENS * sum(isinstance(p, ImagePart) for p in message.content)
    for call in message.tool_calls:
        total += count(call.name) + count(json.dumps(call.arguments, sort_keys=True))
    for block in message.reasoning:
        total += count(block.text or "")
    return total
