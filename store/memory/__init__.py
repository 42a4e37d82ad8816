"""The in-memory backend: the storage port over dicts, for tests and for
users' own tests (`store.testing` is its public name)."""

from store.memory.storage import InMemoryRepository, MemoryStorage

__all__ = ["InMemoryRepository", "MemoryStorage"]
