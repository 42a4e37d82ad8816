"""Errors the assembler raises on purpose (besides `InvalidPayload`, which
is the validator's)."""

from __future__ import annotations

from store.domain.errors import ConfigurationError

# Why each format cannot take a request with nothing in its message list.
_WHY_NOT_EMPTY = {
    "openai-chat": "OpenAI Chat needs at least one message, and there is no system prompt either",
    "openai-responses": "OpenAI Responses refuses a request without input, even with instructions",
    "anthropic": "Anthropic needs at least one message, and the first must be a user turn",
    "gemini": "Gemini needs at least one content",
    "xml-tools": "the request needs at least one message, and there is no system prompt "
    "or final instruction either",
}


class EmptyWindow(ConfigurationError):
    """Nothing to send: the agent's visible window (after repairs and the
    token budget) and its context slots give no message, and the format
    cannot take an empty message list. Nothing is invented to fill it: a
    made-up user turn would be answered as if someone had said it."""

    def __init__(self, format: str, agent_id: str) -> None:
        self.format = format
        self.agent_id = agent_id
        why = _WHY_NOT_EMPTY.get(format, "the format needs at least one message")
        super().__init__(
            f"nothing to send to {format}: agent {agent_id!r} has no visible message and no "
            f"context slot to render; {why}"
        )


class ToolImageTooLarge(ConfigurationError):
    """An image returned by a tool, or all of them together, over the
    limits of `AssembleOptions` (`store.assembler.tool_images`)."""
