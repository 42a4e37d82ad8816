"""Export: a conversation as JSON Lines, one message (or event) per line.

Every message line is typed, so user input and system-generated text never
mix (docs/behaviours.md §6):

    user | assistant | tool | system   the message's role, for ordinary messages
    reminder                           kind `reminder`: text the system generated
                                       (TODO changed, file read, ...), whatever its role
    summary                            kind `summary`: written by compaction

A line carries the conversation's id (as its client named it), the
message's seq, role, kind, agent, batch, recorded time, content (the edited
content if it was edited, with `edited: true`), tool calls, the call it
answers, reasoning data and metadata. With `events`, each line is one raw
event of the log instead (`store.domain.feed.FeedEvent`).

Memory stays flat: lines are produced a keyset page at a time
(`PAGE_SIZE` rows per query, by seq or by version), never a whole
conversation at once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson

from store.domain.feed import FeedEvent
from store.domain.messages import MessageKind, StoredMessage
from store.repository import Repository

PAGE_SIZE = 1000

LINE_TYPES = ("user", "assistant", "tool", "system", "reminder", "summary")


def line_type(message: StoredMessage) -> str:
    """The line's type: `reminder` and `summary` by kind, else the role."""
    if message.kind is MessageKind.REMINDER:
        return "reminder"
    if message.kind is MessageKind.SUMMARY:
        return "summary"
    return message.role


def message_line(conversation: str, message: StoredMessage) -> dict[str, Any]:
    """One message as an export line (a JSON object)."""
    body = message.model_dump(mode="json")
    return {
        "type": line_type(message),
        "conversation_id": conversation,
        "seq": body.pop("seq"),
        "role": body.pop("role"),
        "kind": body.pop("kind"),
        "agent_id": body.pop("agent_id"),
        "batch": body.pop("batch"),
        "recorded_at": body.pop("recorded_at"),
        **body,
    }


def _encode(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


async def message_pages(
    repository: Repository,
    conversation_id: str | uuid.UUID,
    *,
    name: str | None = None,
    page_size: int = PAGE_SIZE,
) -> AsyncIterator[bytes]:
    """The conversation's messages as JSONL, one chunk per page of `page_size`.

    The first page is read when the iteration starts: a missing (or another
    tenant's) conversation raises there, before anything is produced.
    """
    conversation = name if name is not None else str(conversation_id)
    after: int | None = None
    while True:
        page = await repository.read_messages(conversation_id, after_seq=after, limit=page_size)
        if page:
            yield _encode([message_line(conversation, m) for m in page])
        if len(page) < page_size:
            return
        after = page[-1].seq


async def event_pages(
    repository: Repository,
    conversation_id: str | uuid.UUID,
    *,
    name: str | None = None,
    page_size: int = PAGE_SIZE,
) -> AsyncIterator[bytes]:
    """The conversation's raw events as JSONL, one chunk per page, by version."""
    async for page in event_batches(repository, conversation_id, page_size=page_size):
        lines = [e.model_dump(mode="json") for e in page]
        if name is not None:
            for line in lines:
                line["conversation_id"] = name
        yield _encode(lines)


async def event_batches(
    repository: Repository, conversation_id: str | uuid.UUID, *, page_size: int = PAGE_SIZE
) -> AsyncIterator[list[FeedEvent]]:
    """The conversation's events, a page of `page_size` at a time, by version."""
    version = 1
    while True:
        page = await repository.conversation_events(
            conversation_id, from_version=version, limit=page_size
        )
        if page:
            yield page
        if len(page) < page_size:
            return
        version = page[-1].version + 1


def export_pages(
    repository: Repository,
    conversation_id: str | uuid.UUID,
    *,
    events: bool = False,
    name: str | None = None,
    page_size: int = PAGE_SIZE,
) -> AsyncIterator[bytes]:
    """Messages (or, with `events`, raw events) of one conversation, as JSONL chunks."""
    pages = event_pages if events else message_pages
    return pages(repository, conversation_id, name=name, page_size=page_size)
