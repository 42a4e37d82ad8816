"""Listing a tenant's conversations, and paging through reads: the query
values the storage port takes, and the opaque cursors handed to callers.

A cursor is the base64url (unpadded) of a small JSON array holding the
last item's sort key: `[created_at, id]` for conversations (newest or
oldest first, ties by id), `[sort_key]` for a window. Callers treat it as
opaque and send it back; a cursor that does not decode to the expected
shape is refused with `InvalidOperation` (HTTP 422), never a 500.

Why these keys: `conversations` is indexed on (tenant, created_at, id)
(migration 0008), so a page is one index range whatever the offset.
`updated_at` is filtered, not indexed: every append updates it, and an
index on it would turn each of those HOT updates into a new index entry.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from decimal import InvalidOperation as DecimalError
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from store.domain.errors import InvalidOperation
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.messages import StoredMessage
from store.domain.values import Conversation

ConversationOrder = Literal["newest", "oldest"]
MAX_READ_LIMIT = 1000  # the most items a read returns at once (pages, windows, ranges)
MAX_CURSOR_CHARS = 400


@dataclass(frozen=True, kw_only=True)
class ConversationCursor:
    """Where a page of conversations ended: the last one's sort key."""

    created_at: datetime
    id: uuid.UUID


@dataclass(frozen=True, kw_only=True)
class Listed:
    """A listed conversation, and its place in the listing's order."""

    conversation: Conversation
    cursor: ConversationCursor


@dataclass(frozen=True, kw_only=True)
class ConversationQuery:
    """Which of a tenant's conversations to list, and which page of them:
    the one value the HTTP route, `Repository.list_conversations`, the
    storage port and both backends take. Deleted conversations are never
    listed. Checked as it is built: a bad value is `InvalidOperation`."""

    metadata: dict[str, Any] | None = None  # containment, as jsonb @>
    archived: bool | None = None
    created_from: datetime | None = None  # inclusive
    created_to: datetime | None = None  # exclusive
    updated_from: datetime | None = None  # inclusive
    updated_to: datetime | None = None  # exclusive
    order: ConversationOrder = "newest"
    cursor: str | None = None  # a page's `next_cursor`
    limit: int = 50  # the page's size (a storage reads one more: is there a next page?)
    _after: ConversationCursor | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        limit = self.limit
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidOperation(f"limit must be an integer 1..{MAX_READ_LIMIT}, got {limit!r}")
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidOperation(f"limit must be 1..{MAX_READ_LIMIT}, got {limit}")
        if self.order not in ("newest", "oldest"):
            raise InvalidOperation(f"order must be 'newest' or 'oldest', got {self.order!r}")
        if self.metadata is not None:
            problem = json_problem(self.metadata, max_chars=MAX_METADATA_CHARS, what="metadata")
            if problem is not None:
                raise InvalidOperation(f"invalid metadata filter: {problem}")
        for name in ("created_from", "created_to", "updated_from", "updated_to"):
            moment = getattr(self, name)
            if moment is not None and moment.tzinfo is None:
                raise InvalidOperation(f"{name} needs a time zone (e.g. 2026-01-01T00:00:00Z)")
        after = None if self.cursor is None else decode_conversation_cursor(self.cursor)
        object.__setattr__(self, "_after", after)

    @property
    def after(self) -> ConversationCursor | None:
        """Where the previous page ended (the decoded `cursor`)."""
        return self._after

    @property
    def newest(self) -> bool:
        return self.order == "newest"


def conversation_query(**fields: Any) -> ConversationQuery:
    """A `ConversationQuery` from keywords; an unknown one is InvalidOperation."""
    known = ConversationQuery.__dataclass_fields__.keys() - {"_after"}
    unknown = sorted(fields.keys() - known)
    if unknown:
        raise InvalidOperation(
            f"unknown listing filter {', '.join(unknown)}; filters are {', '.join(sorted(known))}"
        )
    return ConversationQuery(**fields)


def _encode(values: list[Any]) -> str:
    raw = json.dumps(values, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode(cursor: str, length: int) -> list[Any]:
    if len(cursor) > MAX_CURSOR_CHARS or not cursor.isascii():
        raise InvalidOperation("invalid cursor: send back a next_cursor as it was given")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError):
        raise InvalidOperation("invalid cursor: send back a next_cursor as it was given") from None
    if not isinstance(values, list) or len(values) != length:
        raise InvalidOperation("invalid cursor: send back a next_cursor as it was given")
    return values


def encode_conversation_cursor(cursor: ConversationCursor) -> str:
    return _encode([cursor.created_at.isoformat(), str(cursor.id)])


def decode_conversation_cursor(cursor: str) -> ConversationCursor:
    created_at, id_ = _decode(cursor, 2)
    try:
        when = datetime.fromisoformat(created_at)
        found = uuid.UUID(id_)
    except (TypeError, ValueError, AttributeError):
        raise InvalidOperation("invalid cursor: send back a next_cursor as it was given") from None
    if when.tzinfo is None:
        raise InvalidOperation("invalid cursor: send back a next_cursor as it was given")
    return ConversationCursor(created_at=when, id=found)


def encode_window_cursor(sort_key: Decimal) -> str:
    return _encode([str(sort_key)])


def decode_window_cursor(cursor: str) -> Decimal:
    (key,) = _decode(cursor, 1)
    try:
        found = Decimal(key)
    except (TypeError, DecimalError):
        raise InvalidOperation("invalid cursor: send back a next_cursor as it was given") from None
    if not found.is_finite() or len(key) > 100:
        raise InvalidOperation("invalid cursor: send back a next_cursor as it was given")
    return found


def json_contains(container: Any, contained: Any) -> bool:
    """PostgreSQL's `jsonb @> jsonb` on parsed JSON: objects contain the
    keys they are asked for (recursively), arrays contain every element
    asked for somewhere among theirs, scalars are equal (1 and 1.0 are,
    true and 1 are not). For the in-memory storage."""
    if isinstance(contained, dict):
        return isinstance(container, dict) and all(
            key in container and json_contains(container[key], value)
            for key, value in contained.items()
        )
    if isinstance(contained, list):
        return isinstance(container, list) and all(
            any(json_contains(item, wanted) for item in container) for wanted in contained
        )
    if isinstance(contained, bool) or isinstance(container, bool):
        return (
            isinstance(contained, bool) and isinstance(container, bool) and contained == container
        )
    if isinstance(contained, int | float) and isinstance(container, int | float):
        return Decimal(str(contained)) == Decimal(str(container))
    return type(contained) is type(container) and bool(contained == container)


class ConversationPage(BaseModel):
    """A page of conversations, and where the next one starts."""

    model_config = ConfigDict(frozen=True)

    items: tuple[Conversation, ...]
    next_cursor: str | None = Field(
        default=None,
        description="Pass as `cursor` for the next page; null: this was the last page.",
    )


class MessagePage(BaseModel):
    """A page of messages by seq, and where the next one starts."""

    model_config = ConfigDict(frozen=True)

    items: tuple[StoredMessage, ...]
    next_after_seq: int | None = Field(
        default=None,
        description="order=asc: pass as `after_seq` for the next page; null: no more.",
    )
    next_before_seq: int | None = Field(
        default=None,
        description="order=desc: pass as `before_seq` for the next page; null: no more.",
    )


class WindowSlice(BaseModel):
    """A page of a window, in window order, and where the next one starts."""

    model_config = ConfigDict(frozen=True)

    items: tuple[StoredMessage, ...]
    next_cursor: str | None = None
