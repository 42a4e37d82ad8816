"""What the client's calls are made of: the `Call` value, the answers the
store has no value for (`Assembled`, `AgentState`), reading an answer's
JSON as the store's values, and writing a request's ids, versions,
query parameters and messages as the API takes them (api/schemas.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from store.assembler.diagnostics import Diagnostics
from store.domain.context import AgentProfile, ContextSlots
from store.domain.conversation_keys import ConversationRef, conversation_key
from store.domain.errors import InvalidOperation
from store.domain.feed import ConversationEvents, FeedEvent
from store.domain.listing import WindowSlice
from store.domain.messages import Message, StoredMessage
from store.domain.operations import (
    BatchOperation,
    refusal,
)
from store.domain.records import ExpectedVersion, StreamState
from store.domain.validation import parse_message

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
# The service's page limits (MAX_READ_LIMIT, MAX_FEED_LIMIT): a whole
# window or feed is read in pages this large.
PAGE = 1000


def client_headers(api_key: str | None) -> dict[str, str]:
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}


NEXT_CURSOR_HEADER = "X-Next-Cursor"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_MESSAGE_FIELDS = set(Message.model_fields)


@dataclass(frozen=True, kw_only=True)
class Call(Generic[T]):
    """One request and the reading of its answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # What errors name: the conversation addressed, the append's key.
    conversation_id: str | None = None
    idempotency_key: str | None = None
    # Safe to send again after a connection lost mid-request.
    replayable: bool = False


class Assembled(BaseModel):
    """The payload of an agent's next LLM call and how it was built (the
    HTTP answer of `assemble`; `Repository.assemble` answers an `Assembly`
    with the same `payload` and `diagnostics`)."""

    model_config = ConfigDict(frozen=True)

    payload: dict[str, Any]
    diagnostics: Diagnostics


class AgentState(BaseModel):
    """An agent's profile and context slots (`GET .../agents/{agent_id}`)."""

    model_config = ConfigDict(frozen=True)

    profile: AgentProfile
    slots: ContextSlots


class _Written(BaseModel):
    conversation_id: str
    version: int


# --- reading answers -----------------------------------------------------------------


def answer_of(cls: type[T]) -> Callable[[httpx.Response], T]:
    adapter: TypeAdapter[T] = TypeAdapter(cls)
    return lambda response: adapter.validate_json(response.content)


def no_answer(response: httpx.Response) -> None:
    return None


message_list = answer_of(list[StoredMessage])


def version_of(response: httpx.Response) -> int:
    return _Written.model_validate_json(response.content).version


def window_slice(response: httpx.Response) -> WindowSlice:
    return WindowSlice(
        items=tuple(message_list(response)),
        next_cursor=response.headers.get(NEXT_CURSOR_HEADER),
    )


def event_list(response: httpx.Response) -> list[FeedEvent]:
    return ConversationEvents.model_validate_json(response.content).events


# --- building requests -----------------------------------------------------------------


def segment(conversation_id: ConversationRef) -> tuple[str, str]:
    """The checked id, and it as one path segment (a `/` in it escaped)."""
    key = conversation_key(conversation_id)
    return key, quote(key, safe="")


def expected(version: ExpectedVersion) -> int | None:
    """An expected version as the API's `expected_version` (null: any)."""
    if version is StreamState.ANY:
        return None
    if isinstance(version, StreamState):
        raise InvalidOperation(
            "over HTTP a write expects a version number or any (creating expects no stream)"
        )
    return version


def query(**values: Any) -> dict[str, str]:
    """Query parameters: None left out, booleans and times as the API reads them."""
    found: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            found[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            found[name] = value.isoformat()
        else:
            found[name] = str(value)
    return found


def wire_messages(messages: Sequence[Message | dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the API takes them, checked as the library checks them."""
    parsed = [parse_message(m, i) for i, m in enumerate(messages)]
    if not parsed:
        raise InvalidOperation("append needs at least one message")
    return [m.model_dump(mode="json", include=_MESSAGE_FIELDS) for m in parsed]


def operation_of(kind: type[BatchOperation], **fields: Any) -> BatchOperation:
    try:
        return kind(**fields)
    except ValidationError as error:
        raise refusal(error) from None
