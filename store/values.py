"""What the repository answers: conversations, append results, batches,
tool blocks. Frozen values, built by a storage from its rows."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from store.messages import StoredMessage

Scope = Literal["visible", "history"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Conversation(_Value):
    id: uuid.UUID
    tenant: str
    version: int
    current_batch: int
    next_seq: int
    archived: bool
    started_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)


class Appended(_Value):
    """What an append stored: the messages as numbered, and the new version."""

    conversation_id: uuid.UUID
    version: int
    messages: tuple[StoredMessage, ...]
    replayed: bool = False  # an idempotent retry: nothing was written


class Batch(_Value):
    number: int
    boundary: Decimal
    summary_seq: int | None
    retained: tuple[int, ...]
    operation: str
    parameters: dict[str, Any]
    started_at: datetime


class BatchResult(_Value):
    """What a batch operation did: the new version and the new batch."""

    conversation_id: uuid.UUID
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
