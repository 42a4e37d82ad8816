"""convo-store: an event-sourced conversation store for LLM agents.

The names an agent builder needs, in one place:

    from store import AgentProfile, Message, Repository, TodoItem, ToolCall
    from store.postgres import PostgresStorage      # or store.testing.InMemoryRepository

Where each lives: `store.domain` (values, events, errors), `store.repository`
(the API and its storage port), `store.postgres` and `store.memory` (the
backends), `store.assembler` (payloads), `store.compaction`, `store.adapters`.
"""

from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.errors import (
    BoundaryError,
    ConcurrencyConflict,
    ConfigurationError,
    ConversationBusy,
    ConversationDeleted,
    ConversationIsArchived,
    ConversationNotFound,
    ConvoStoreError,
    IdempotencyConflict,
    InvalidMessage,
    InvalidOperation,
    StorageError,
    StorageFailure,
    StorageUnavailable,
)
from store.domain.feed_vector import FeedVector
from store.domain.messages import (
    MAIN_AGENT,
    ImagePart,
    Message,
    MessageKind,
    Reasoning,
    StoredMessage,
    TextPart,
    ToolCall,
)
from store.domain.records import FeedPosition, StreamState
from store.repository import ANY, Repository

__all__ = [
    "ANY",
    "MAIN_AGENT",
    "AgentProfile",
    "BoundaryError",
    "ConcurrencyConflict",
    "ConfigurationError",
    "ContextSlots",
    "ConversationBusy",
    "ConversationDeleted",
    "ConversationIsArchived",
    "ConversationNotFound",
    "ConvoStoreError",
    "FeedPosition",
    "FeedVector",
    "IdempotencyConflict",
    "ImagePart",
    "InvalidMessage",
    "InvalidOperation",
    "Message",
    "MessageKind",
    "Reasoning",
    "Repository",
    "StorageError",
    "StorageFailure",
    "StorageUnavailable",
    "StoredMessage",
    "StreamState",
    "TextPart",
    "TodoItem",
    "ToolCall",
]
