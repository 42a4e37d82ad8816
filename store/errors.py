"""Every error convo-store raises on purpose.

    ConvoStoreError
    ├── ConcurrencyConflict       expected version != actual version
    ├── IdempotencyConflict       same idempotency key, different content
    ├── ConversationNotFound
    ├── ConversationDeleted       the conversation was purged
    ├── InvalidMessage            a message breaks a rule (names which and why)
    ├── InvalidOperation          a batch/context operation that cannot apply
    │   └── BoundaryError         a boundary would split a tool block or hide a pending call
    └── ConfigurationError        e.g. a sub-agent without a role definition

Each carries what a caller needs to react (versions, the message index, the
offending call ids) as attributes, and a message a person can act on.
"""

from __future__ import annotations

from typing import Any


class ConvoStoreError(Exception):
    """Base of every error raised on purpose by convo-store."""


class ConcurrencyConflict(ConvoStoreError):
    def __init__(self, conversation_id: Any, expected: Any, actual: int | None) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.actual = actual
        actual_text = "no stream" if actual is None else f"version {actual}"
        super().__init__(
            f"concurrency conflict on conversation {conversation_id}: "
            f"expected {expected}, but it is at {actual_text}"
        )


class IdempotencyConflict(ConvoStoreError):
    def __init__(self, key: str, detail: str = "") -> None:
        self.key = key
        super().__init__(
            f"idempotency key {key!r} was already used for a different append"
            + (f": {detail}" if detail else "")
        )


class ConversationNotFound(ConvoStoreError):
    def __init__(self, conversation_id: Any) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id} does not exist")


class ConversationDeleted(ConvoStoreError):
    def __init__(self, conversation_id: Any) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id} was deleted")


class InvalidMessage(ConvoStoreError, ValueError):
    """A message breaks a rule; nothing of its append was stored."""

    def __init__(self, problem: str, *, index: int | None = None, client_id: str | None = None):
        self.problem = problem
        self.index = index
        self.client_id = client_id
        where = []
        if index is not None:
            where.append(f"message #{index}")
        if client_id is not None:
            where.append(f"client id {client_id!r}")
        prefix = f"{' / '.join(where)}: " if where else ""
        super().__init__(f"invalid message: {prefix}{problem}")


class InvalidOperation(ConvoStoreError, ValueError):
    """A batch or context operation that cannot apply as asked."""


class BoundaryError(InvalidOperation):
    """A batch boundary would split a tool-call block or hide a pending call."""


class ConfigurationError(ConvoStoreError, ValueError):
    """The stored configuration cannot produce a payload (e.g. a sub-agent
    without a role definition)."""
