"""The port and the repository: the agents' and analysts' API over a storage.

`Repository` (store.repository.repository) is written once over the
`Storage` port (store.repository.port); the backends that implement the
port are `store.postgres` and `store.memory`. `ConversationRepository`
(store.repository.protocol) is what the framework adapters call, which
the HTTP client (`store.client`) offers as well.
"""

from store.repository.protocol import ConversationRepository
from store.repository.repository import (
    ANY,
    DEFAULT_TENANT,
    MAX_READ_LIMIT,
    Appended,
    Batch,
    BatchResult,
    Conversation,
    Repository,
    Scope,
    ToolBlock,
)

__all__ = [
    "ANY",
    "DEFAULT_TENANT",
    "MAX_READ_LIMIT",
    "Appended",
    "Batch",
    "BatchResult",
    "Conversation",
    "ConversationRepository",
    "Repository",
    "Scope",
    "ToolBlock",
]
