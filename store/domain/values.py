"""What the repository answers: conversations, append results, batches,
tool blocks. Frozen values, built by a storage from its rows."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

from store.domain.messages import StoredMessage

Scope = Literal["visible", "history"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Conversation(_Value):
    # The id its creator chose (store.domain.conversation_keys), unique per tenant.
    id: str
    tenant: str
    version: int
    current_batch: int
    next_seq: int
    archived: bool
    started_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
    # When its last event was recorded (None where a storage did not say).
    updated_at: datetime | None = None


class Appended(_Value):
    """What an append stored: the messages as numbered, and the new version."""

    conversation_id: str
    version: int
    messages: tuple[StoredMessage, ...]
    replayed: bool = False  # an idempotent retry: nothing was written


def _sort_key_number(key: Decimal) -> int | float:
    # A whole key (a seq) as an integer, a fraction as the nearest float:
    # JSON has one number type, and a boundary is only shown, never sent back.
    return int(key) if key == key.to_integral_value() else float(key)


SortKeyNumber = Annotated[
    Decimal,
    PlainSerializer(_sort_key_number, return_type=Any, when_used="json"),
    WithJsonSchema({"type": "number"}, mode="serialization"),
]


class Batch(_Value):
    number: int
    # The window's sort key from which it shows every message: a seq, or a
    # fraction between two (a message inserted there); a number in JSON.
    boundary: SortKeyNumber
    summary_seq: int | None
    retained: tuple[int, ...]
    operation: str
    parameters: dict[str, Any]
    started_at: datetime
    # The agent whose window it is; None: every agent's (a conversation's
    # first batch, and batches recorded before windows were per agent).
    agent_id: str | None = None


class BatchResult(_Value):
    """What a batch operation did: the new version and the new batch."""

    conversation_id: str
    version: int
    batch: int
    visible: int  # messages shown by the new batch right after it started


class ToolBlock(_Value):
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    agent_id: str
    assistant_seq: int
    result_seq: int | None
    status: Literal["pending", "complete"]
    is_error: bool
