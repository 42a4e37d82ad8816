"""For your own tests: the repository over the in-memory storage.

    repository = InMemoryRepository(tenant="acme")

It runs the same decisions and projector as PostgreSQL (one contract suite
runs against both), with no database.
"""

from store.memory import InMemoryRepository, MemoryStorage

__all__ = ["InMemoryRepository", "MemoryStorage"]
