"""The port and the repository: the agents' and analysts' API over a storage.

`Repository` (store.repository.repository) is written once over the
`Storage` port (store.repository.port); the backends that implement the
port are `store.postgres` and `store.memory`. `ConversationRepository`
(store.repository.protocol) is what the framework adapters call, which
the HTTP client (`store.client`) offers as well.
"""

from store.domain.listing import MAX_READ_LIMIT
from store.domain.values import Appended, Batch, BatchResult, Conversation, Scope, ToolBlock
from store.repository.protocol import ConversationRepository
from store.repository.repository import Repository
from store.repository.write_path import ANY, DEFAULT_TENANT

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
