"""The summarizer protocol, the default summarizer, and what a summary must be.

A compaction's summary stands in for the messages that leave the window.
Who writes it is pluggable: anything with

    async def summarize(
        self, messages: Sequence[StoredMessage], *, conversation_id: str, agent_id: str
    ) -> str

is a `Summarizer`. `messages` are the agent's messages leaving the window,
in window order (an earlier summary among them, which the new one should
carry forward). It returns the summary's text; raising, returning an empty
text or a text longer than the policy allows makes that conversation's
compaction fail — reported, and nothing changed (`check_summary`).

`ExtractiveSummarizer` is the default: deterministic, offline, no model.
It lists the user's requests, the tools used (with how often, and how many
failed), and the assistant's answers (replies that carry no tool call),
each clipped, within a bounded length. An earlier summary is carried
forward at the top. `store.compaction.openai_compatible` is an example
summarizer that asks a model behind any OpenAI-compatible endpoint.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from store.domain.messages import MessageKind, StoredMessage


@runtime_checkable
class Summarizer(Protocol):
    """Writes the text that stands in for messages leaving a window."""

    async def summarize(
        self, messages: Sequence[StoredMessage], *, conversation_id: str, agent_id: str
    ) -> str:
        """The summary of `messages` (in window order), as plain text."""
        ...


class SummaryRefused(Exception):
    """A summary that cannot close a batch: empty, or too long."""


def check_summary(text: object, *, max_chars: int) -> str:
    """The summary, stripped, or SummaryRefused saying what is wrong with it."""
    if not isinstance(text, str):
        raise SummaryRefused(f"the summarizer returned {type(text).__name__}, not text")
    text = text.strip()
    if not text:
        raise SummaryRefused("the summarizer returned an empty summary")
    if len(text) > max_chars:
        raise SummaryRefused(
            f"the summary has {len(text)} characters, more than the {max_chars} allowed"
        )
    if "\x00" in text:
        raise SummaryRefused("the summary contains a NUL character")
    return text


def clip(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


class ExtractiveSummarizer:
    """The default summarizer: picks lines out of the messages, no model.

    At most `max_requests` user requests and `max_answers` answers (the
    latest ones; how many were left out is said), each clipped to
    `item_chars`; the whole text clipped to `max_chars`.
    """

    name = "extractive"

    def __init__(
        self,
        *,
        max_requests: int = 8,
        max_answers: int = 5,
        item_chars: int = 240,
        max_chars: int = 4_000,
    ) -> None:
        self.max_requests = max_requests
        self.max_answers = max_answers
        self.item_chars = item_chars
        self.max_chars = max_chars

    async def summarize(
        self, messages: Sequence[StoredMessage], *, conversation_id: str, agent_id: str
    ) -> str:
        return self.summary_text(messages)

    def summary_text(self, messages: Sequence[StoredMessage]) -> str:
        if not messages:
            return ""
        earlier = [m.text for m in messages if m.kind == MessageKind.SUMMARY and m.text.strip()]
        requests = [
            m.text
            for m in messages
            if m.role == "user" and m.kind != MessageKind.SUMMARY and m.text.strip()
        ]
        answers = [
            m.text
            for m in messages
            if m.role == "assistant" and not m.tool_calls and m.text.strip()
        ]
        tools: Counter[str] = Counter()
        names: dict[str, str] = {}
        for m in messages:
            for call in m.tool_calls:
                tools[call.name] += 1
                names[call.id] = call.name
        failed: Counter[str] = Counter(
            names.get(m.tool_call_id or "", "?")
            for m in messages
            if m.role == "tool" and m.is_error
        )
        first, last = min(m.seq for m in messages), max(m.seq for m in messages)
        lines = [f"Summary of {len(messages)} earlier messages (seq {first}-{last})."]
        if earlier:
            lines.append("Before that: " + clip(earlier[-1], self.max_chars // 2))
        lines += self._section("User requests", requests, self.max_requests)
        if tools:
            used = ", ".join(
                f"{name} ×{count}" + (f" ({failed[name]} failed)" if failed[name] else "")
                for name, count in sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            lines.append("Tools used: " + clip(used, self.item_chars * 2))
        lines += self._section("Answers", answers, self.max_answers)
        return clip_lines(lines, self.max_chars)

    def _section(self, title: str, items: list[str], most: int) -> list[str]:
        if not items:
            return []
        shown = items[-most:] if most else []
        head = (
            f"{title}:"
            if len(shown) == len(items)
            else (f"{title} (the last {len(shown)} of {len(items)}):")
        )
        return [head, *(f"- {clip(item, self.item_chars)}" for item in shown)]


def clip_lines(lines: list[str], max_chars: int) -> str:
    """Lines joined by newlines, stopping before the one that would pass `max_chars`."""
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(kept) if kept else clip(lines[0], max_chars)
