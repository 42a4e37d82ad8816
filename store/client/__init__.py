"""A Python client for the convo-store HTTP API (`pip install convo-store[client]`).

    from store.client import AsyncConvoClient, ConvoClient

`AsyncConvoClient` (asyncio) and `ConvoClient` (blocking) send the API's
requests and read its answers as the store's own values; they offer the
repository's methods with its signatures, so a framework adapter
(store.adapters) runs over the service given a client instead of a
repository. Errors are the library's exception classes
(`store.domain.errors`), raised from the service's problem details;
requests the service turns away for now (409 `ConversationBusy`, 503) are
retried after `Retry-After`; every append carries an idempotency key.
docs/adapters.md ("Over HTTP") shows one in use.
"""

from store.client.asynchronous import AsyncConvoClient
from store.client.problems import (
    FieldProblem,
    InternalError,
    PayloadTooLarge,
    Problem,
    ServiceProblem,
    Unauthorized,
    ValidationError,
    problem_of,
)
from store.client.retrying import NO_RETRY, RetryPolicy
from store.client.synchronous import ConvoClient
from store.client.wire import AgentState, Assembled

__all__ = [
    "NO_RETRY",
    "AgentState",
    "Assembled",
    "AsyncConvoClient",
    "ConvoClient",
    "FieldProblem",
    "InternalError",
    "PayloadTooLarge",
    "Problem",
    "RetryPolicy",
    "ServiceProblem",
    "Unauthorized",
    "ValidationError",
    "problem_of",
]
