"""An example LLM-backed summarizer, for any OpenAI-compatible endpoint.

    from store.compaction import CompactionJob, CompactionPolicy
    from store.compaction.openai_compatible import OpenAICompatibleSummarizer

    summarizer = OpenAICompatibleSummarizer(
        base_url="http://localhost:11434/v1",  # Ollama, vLLM, LiteLLM, OpenAI, ...
        model="llama3.1",
        api_key=os.environ.get("OPENAI_API_KEY"),
    )
    job = CompactionJob(repository, CompactionPolicy(max_tokens=60_000), summarizer=summarizer)

It sends one Chat Completions request (`POST {base_url}/chat/completions`)
with an instruction and a plain-text transcript of the messages leaving
the window (each clipped, the whole bounded), and returns the answer's
text. Any HTTP or shape problem raises, which the job reports as a failed
summary — the conversation then stays as it was. Needs `httpx`
(`pip install httpx`); it is not imported by `store.compaction`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from store.compaction.summarizer import clip
from store.domain.messages import MessageKind, StoredMessage

INSTRUCTION = (
    "You compact an AI agent's conversation history. Summarize the transcript below so the "
    "agent can continue without it: the user's goals and requests, decisions made, tools "
    "used and what they found, open questions, and the latest state of the work. Be "
    "factual and concise; write plain text, no preamble."
)


class SummarizerFailed(Exception):
    """The endpoint answered something that is not a summary."""


class OpenAICompatibleSummarizer:
    """Asks a model behind an OpenAI-compatible Chat Completions endpoint."""

    name = "openai-compatible"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 800,
        message_chars: int = 2_000,
        transcript_chars: int = 60_000,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.message_chars = message_chars
        self.transcript_chars = transcript_chars
        self.client = client

    def transcript(self, messages: Sequence[StoredMessage]) -> str:
        """The messages as `[seq] role: text` lines (tool calls named), the
        latest kept when the whole would be longer than `transcript_chars`."""
        lines = []
        for m in messages:
            label = "earlier summary" if m.kind == MessageKind.SUMMARY else m.role
            text = clip(m.text, self.message_chars)
            calls = ", ".join(c.name for c in m.tool_calls)
            if calls:
                text = f"{text} [calls: {calls}]".strip()
            if m.is_error:
                text = f"[error] {text}"
            lines.append(f"[{m.seq}] {label}: {text}")
        kept: list[str] = []
        size = 0
        for line in reversed(lines):
            if size + len(line) + 1 > self.transcript_chars:
                break
            kept.append(line)
            size += len(line) + 1
        return "\n".join(reversed(kept))

    def request_body(self, messages: Sequence[StoredMessage]) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": self.transcript(messages)},
            ],
        }

    async def summarize(
        self, messages: Sequence[StoredMessage], *, conversation_id: str, agent_id: str
    ) -> str:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = self.request_body(messages)
        if self.client is not None:
            response = await self.client.post(
                self.url, json=body, headers=headers, timeout=self.timeout
            )
        else:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(self.url, json=body, headers=headers)
        response.raise_for_status()
        return _answer(response.json())


def _answer(document: Any) -> str:
    try:
        content = document["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise SummarizerFailed("the endpoint's answer has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise SummarizerFailed("the endpoint's answer is not text")
    return content
