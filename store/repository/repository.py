"""The agents' and analysts' async API, written once over a storage port.

    repository = Repository(await PostgresStorage.connect(url))   # or
    repository = InMemoryRepository()                             # store.memory

Every write runs the same way, whatever the storage (`store.repository.port`),
through one helper (`store.repository.write_path`): lock the conversation's
stream row → answer an idempotent retry from what the first attempt stored
→ check the expected version → decide the events (`store.domain.commands`,
against the locked state) → derive the views' changes
(`store.domain.projector`) → write events, views and the request in one
transaction → answer from what was decided, without reading back.

The class is one API assembled from its parts, one module each:
conversations (`conversations`), forks (`forks`), appends and context
writes (`appends`), batch operations (`batch_operations`), reads of a
conversation (`reads`) and of the log (`feed`), and retention's moves to
cold storage and back (`retention`).

Conventions:
- Writes take `expected_version` (an int, or `StreamState.ANY`): a stale
  expectation raises `ConcurrencyConflict`, never a silent overwrite.
- Role ordinals are 1-based: `role_range(c, "assistant", 2, 5)` is the 2nd
  to the 5th assistant message, inclusive.
- `scope="visible"` reads the current batch's window; `scope="history"`
  reads every message ever appended.
- Batches are numbered from 1 (the conversation's first window).
"""

from __future__ import annotations

from store.domain.commands import Limits
from store.repository.appends import Appends
from store.repository.batch_operations import BatchOperations
from store.repository.conversations import Conversations
from store.repository.feed import Feed
from store.repository.forks import Forks
from store.repository.port import Storage
from store.repository.reads import Reads
from store.repository.retention import Retention
from store.repository.write_path import DEFAULT_TENANT

__all__ = ["Repository"]


class Repository(Conversations, Forks, Appends, BatchOperations, Reads, Feed, Retention):
    """The store's API for one tenant, over a `Storage`."""

    def __init__(
        self,
        storage: Storage,
        *,
        tenant: str = DEFAULT_TENANT,
        limits: Limits | None = None,
    ) -> None:
        self.storage = storage
        self.tenant = tenant
        self.limits = limits or Limits()

    def for_tenant(self, tenant: str, *, limits: Limits | None = None) -> Repository:
        """A repository of `tenant` over the same storage."""
        return Repository(self.storage, tenant=tenant, limits=limits or self.limits)
