"""Every error convo-store raises on purpose.

    ConvoStoreError
    ├── ConcurrencyConflict       expected version != actual version
    │   └── ConversationExists    creating an id the tenant already has
    ├── IdempotencyConflict       same idempotency key, different content
    ├── ConversationNotFound
    ├── ConversationDeleted       the conversation was purged
    ├── ConversationIsArchived    a write to an archived conversation (unarchive it first)
    ├── InvalidMessage            a message breaks a rule (names which and why)
    ├── InvalidOperation          a batch/context operation that cannot apply
    │   └── BoundaryError         a boundary would split a tool block or hide a pending call
    ├── ConfigurationError        e.g. a sub-agent without a role definition
    └── StorageFailure            the database did not carry out the request
        ├── ConversationBusy      another writer holds the conversation; retry after `retry_after`
        ├── StorageUnavailable    the database cannot be reached (or the pool is exhausted); retry
        └── StorageError          any other database failure: a bug, retrying does not help

Each carries what a caller needs to react (versions, the message index, the
offending call ids) as attributes, and a message a person can act on.

The `StorageFailure`s are the driver's errors made ours, by
`store.postgres.driver_errors.translate`: they never carry a statement, its
parameters or the server's message text (which can quote stored values),
only the SQLSTATE and the driver's error class name. `docs/errors.md` says
what each error means for a caller and whether a retry helps.
"""

from __future__ import annotations

from typing import Any


class ConvoStoreError(Exception):
    """Base of every error raised on purpose by convo-store."""


class ConcurrencyConflict(ConvoStoreError):
    """The stream is not at the version the caller expected.

    `expected` and `actual` are None when only the database's unique key on
    (conversation, version) noticed the race (`lost_race`): the versions are
    not known there. Either way: read again, decide again, retry.
    """

    def __init__(
        self,
        conversation_id: Any,
        expected: Any,
        actual: int | None,
        *,
        detail: str | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.actual = actual
        if detail is None:
            actual_text = "no stream" if actual is None else f"version {actual}"
            detail = f"expected {expected}, but it is at {actual_text}"
        super().__init__(f"concurrency conflict on conversation {conversation_id}: {detail}")

    @classmethod
    def lost_race(cls, conversation_id: Any) -> ConcurrencyConflict:
        """Another writer stored the same version (or created the same
        conversation) first, and a unique key of the database caught it."""
        return cls(
            conversation_id,
            None,
            None,
            detail="another writer changed it at the same time; read it again and retry",
        )


class ConversationExists(ConcurrencyConflict):
    """A create named an id this tenant already has. A `ConcurrencyConflict`
    (the create expected no stream), so a caller catching that still does."""

    def __init__(self, conversation_id: Any, actual: int | None = None) -> None:
        self.conversation_id = conversation_id
        self.expected = "no stream"
        self.actual = actual
        ConvoStoreError.__init__(
            self, f"conversation {conversation_id} already exists; choose another id"
        )


class IdempotencyConflict(ConvoStoreError):
    """An idempotency key (or client message id) was already used for an
    append with other content. `key` is None when only the database's unique
    key noticed, which does not say which key it was."""

    def __init__(self, key: str | None, detail: str = "") -> None:
        self.key = key
        if key is None:
            text = "an idempotency key or client message id of this append was already used"
        else:
            text = f"idempotency key {key!r} was already used for a different append"
        super().__init__(text + (f": {detail}" if detail else ""))


class ConversationNotFound(ConvoStoreError):
    def __init__(self, conversation_id: Any) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id} does not exist")


class ConversationDeleted(ConvoStoreError):
    def __init__(self, conversation_id: Any) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id} was deleted")


class ConversationIsArchived(ConvoStoreError):
    """An archived conversation is read-only: every write but `unarchive`
    (and `delete`) is refused until it is unarchived. (Not named
    `ConversationArchived`: that is the event that archives it.)"""

    def __init__(self, conversation_id: Any) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"conversation {conversation_id} is archived, so it is read-only;"
            " unarchive it before writing to it"
        )


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


# A setting-free default: long enough for the lock holder's short
# transaction to end (appends hold the row lock for milliseconds), short
# enough that a waiting agent barely notices. Callers may pass their own.
DEFAULT_RETRY_AFTER = 1.0


class StorageFailure(ConvoStoreError):
    """The database did not carry out the request.

    Never carries the statement, its parameters or the server's message
    (which may quote stored values): only `sqlstate` (None when the failure
    had none, e.g. no connection at all) and `error_class`, the driver's
    exception class name. `retryable` says whether the same request may
    succeed later; `retry_after` is then the seconds to wait first.
    """

    retryable = False

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        sqlstate: str | None = None,
        error_class: str | None = None,
    ) -> None:
        self.retry_after = retry_after
        self.sqlstate = sqlstate
        self.error_class = error_class
        super().__init__(message)


class ConversationBusy(StorageFailure):
    """The conversation's row lock could not be had within `lock_timeout`:
    another writer holds it. Also a serialization failure or a deadlock the
    database broke by cancelling us. Nothing was stored; retry after
    `retry_after` seconds (with the same idempotency key or client ids)."""

    retryable = True
    retry_after: float

    def __init__(
        self,
        conversation_id: Any = None,
        *,
        retry_after: float = DEFAULT_RETRY_AFTER,
        sqlstate: str | None = None,
        error_class: str | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        what = "the conversation" if conversation_id is None else f"conversation {conversation_id}"
        super().__init__(
            f"{what} is busy: another writer holds it; retry after {retry_after:g} s",
            retry_after=retry_after,
            sqlstate=sqlstate,
            error_class=error_class,
        )


class StorageUnavailable(StorageFailure):
    """The database cannot be reached, is shutting down or out of resources,
    a statement ran past `statement_timeout`, or the connection pool has no
    free connection. Retry after `retry_after` seconds. If the connection
    broke during a commit, the write may have been stored: retry with the
    same idempotency key (or client message ids) so it is not stored twice."""

    retryable = True
    retry_after: float

    def __init__(
        self,
        reason: str = "the database cannot be reached",
        *,
        retry_after: float = DEFAULT_RETRY_AFTER,
        sqlstate: str | None = None,
        error_class: str | None = None,
    ) -> None:
        self.reason = reason
        super().__init__(
            f"storage unavailable: {reason}; retry after {retry_after:g} s",
            retry_after=retry_after,
            sqlstate=sqlstate,
            error_class=error_class,
        )


class StorageError(StorageFailure):
    """Any other database failure: a statement the database refused (a
    check constraint, a type error, a bug in our SQL). Retrying the same
    request does not help. Carries only the SQLSTATE and the driver's error
    class name, never the statement or its parameters."""

    def __init__(self, *, sqlstate: str | None = None, error_class: str | None = None) -> None:
        state = f" (SQLSTATE {sqlstate})" if sqlstate else ""
        super().__init__(
            f"the database failed: {error_class or 'unknown error'}{state}",
            sqlstate=sqlstate,
            error_class=error_class,
        )
