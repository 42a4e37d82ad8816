"""What every provider renderer shares: its input and output values, and the
small conversions (image URLs, argument JSON, mid-conversation system text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from store.assembler.diagnostics import ReasoningReplay, Repair
from store.assembler.reminders import wrap_reminder
from store.domain.json_text import sorted_json
from store.domain.messages import ImagePart, Message, TextPart

# The text of the minimal user turn added when a provider needs the history to
# start with a user turn and the visible window starts with an assistant one.
CONTINUATION_TEXT = "(conversation continues)"


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """The neutral input of a renderer: system prompt + placed history
    (special block included, its messages marked)."""

    system_prompt: str | None
    history: tuple[Message, ...]


@dataclass(frozen=True, kw_only=True)
class Rendered:
    payload: dict[str, Any]
    repairs: tuple[Repair, ...] = ()
    cache_breakpoints: tuple[str, ...] = field(default=())
    reasoning: ReasoningReplay | None = None


# json.dumps(..., sort_keys=True, ensure_ascii=False), its encoder built once
# (store.domain.json_text).
_encode_arguments = sorted_json(ensure_ascii=False)


def arguments_json(arguments: dict[str, Any]) -> str:
    # Sorted keys: Postgres JSONB reorders keys, and the prefix cache needs
    # the same bytes for the same call on every build.
    return _encode_arguments(arguments)


def image_url(part: ImagePart) -> str:
    if part.url is not None:
        return part.url
    return f"data:{part.media_type};base64,{part.data}"


def text_parts(message: Message) -> list[str]:
    """Non-empty text pieces of a message, in order."""
    if isinstance(message.content, str):
        return [message.content] if message.content.strip() else []
    return [p.text for p in message.content if isinstance(p, TextPart) and p.text.strip()]


def system_note_text(message: Message) -> str:
    """A mid-conversation system message as user-turn text, for providers with
    no system role inside the conversation."""
    return wrap_reminder(message.text)


def reasoning_for(message: Message, provider: str) -> list[Any]:
    return [r for r in message.reasoning if r.provider == provider]
