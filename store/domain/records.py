"""Value types of the event log: events as recorded, expected stream
states and positions in the global feed."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict


class StreamState(Enum):
    """Expected versions that are not a number."""

    ANY = "any"  # append whatever the version (creates the stream if needed)
    NO_STREAM = "no_stream"  # the conversation must not exist yet


ExpectedVersion = int | StreamState


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FeedPosition(_Value):
    """Where a reader of the global feed is: it has read everything up to
    and including this (transaction_id, position)."""

    transaction_id: int
    position: int

    @classmethod
    def start(cls) -> FeedPosition:
        return cls(transaction_id=0, position=0)


class RecordedEvent(_Value):
    position: int
    conversation_id: uuid.UUID
    version: int
    type: str
    data: dict[str, Any]
    recorded_at: datetime
    transaction_id: int

    @property
    def feed_position(self) -> FeedPosition:
        return FeedPosition(transaction_id=self.transaction_id, position=self.position)


def canonical_hash(value: Any) -> str:
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()
