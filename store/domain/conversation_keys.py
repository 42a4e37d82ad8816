"""Conversation ids users choose, and the stream ids the storage keys by.

A conversation is addressed by the id its creator chose: any string of 1-200
printable characters ("user-123", a framework's session id, a UUID), or a
UUID generated when none was given. Ids are unique per tenant: two tenants
may both have "user-123" and neither learns of the other.

The storage keys every row by a 16-byte `uuid` (compact in each of the
views' indexes), derived here as uuid5 of the tenant and the id. So the
derivation is the lookup: no table maps ids to streams, an id costs nothing
on the write path, and another tenant's "user-123" is another stream,
which is why a create never collides across tenants. The id itself is kept
once, on the stream row (`conversations.key`) and in the
`conversation_started` event, for listings, exports and the feed.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from store.domain.errors import ConvoStoreError, InvalidOperation

MAX_KEY_LENGTH = 200

# Fixed forever: changing it would re-address every conversation.
_NAMESPACE = uuid.UUID("0b7e3c52-61a4-4f0e-9d3a-5c8e2f14a9b7")

ConversationRef = str | uuid.UUID
"""What callers pass: the id as a string, or a `uuid.UUID` (its text form)."""


def key_problem(key: object) -> str | None:
    """What is wrong with `key` as a conversation id, or None."""
    if not isinstance(key, str):
        return f"a conversation id is a string, got {type(key).__name__}"
    if not key:
        return "a conversation id cannot be empty"
    if len(key) > MAX_KEY_LENGTH:
        return f"a conversation id has at most {MAX_KEY_LENGTH} characters, got {len(key)}"
    if not key.isprintable():
        return "a conversation id must be printable characters (no control characters)"
    if key != key.strip():
        return "a conversation id cannot start or end with whitespace"
    return None


def conversation_key(conversation: ConversationRef) -> str:
    """The id as a checked string; `InvalidOperation` names what is wrong."""
    key = str(conversation) if isinstance(conversation, uuid.UUID) else conversation
    problem = key_problem(key)
    if problem is not None:
        raise InvalidOperation(problem)
    return key


def new_key() -> str:
    """The id of a conversation created without one."""
    return str(uuid.uuid4())


@functools.lru_cache(maxsize=4096)
def stream_id(tenant: str, key: str) -> uuid.UUID:
    """The storage's id of `tenant`'s conversation `key` (already checked).

    Cached: an agent appends to the same few conversations over and over,
    and the SHA-1 is paid in Python by every append."""
    return uuid.uuid5(_NAMESPACE, f"{tenant}\x00{key}")


# --- the repository's entry points ------------------------------------------------


class _Tenanted(Protocol):
    tenant: str


_Self = TypeVar("_Self", bound=_Tenanted)
_P = ParamSpec("_P")
_R = TypeVar("_R")

# The conversation the current repository call addresses: (id, stream id).
_ADDRESS: ContextVar[tuple[str, uuid.UUID] | None] = ContextVar("convo_address", default=None)


def current_key() -> str:
    """The id the running `addressed` call was given (for its answer)."""
    address = _ADDRESS.get()
    if address is None:
        raise RuntimeError("current_key() outside an addressed repository call")
    return address[0]


def _named(error: ConvoStoreError, key: str, stream: uuid.UUID) -> None:
    """Make an error raised below about `stream` name the caller's id."""
    if getattr(error, "conversation_id", None) == stream:
        error.conversation_id = key  # type: ignore[attr-defined]
        error.args = tuple(
            arg.replace(str(stream), key) if isinstance(arg, str) else arg for arg in error.args
        )


def addressed(
    method: Callable[Concatenate[_Self, uuid.UUID, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[_Self, ConversationRef, _P], Coroutine[Any, Any, _R]]:
    """A repository method addressed by the caller's conversation id.

    The method body works with the stream id (what the storage keys by);
    callers pass the id they chose, and errors name it. A method called by
    another addressed method with the stream id it was given is not
    translated twice.
    """

    @functools.wraps(method)
    async def call(self: _Self, conversation: ConversationRef, /, *args: Any, **kwargs: Any) -> _R:
        current = _ADDRESS.get()
        if current is not None and conversation == current[1]:
            return await method(self, current[1], *args, **kwargs)
        key = conversation_key(conversation)
        stream = stream_id(self.tenant, key)
        token = _ADDRESS.set((key, stream))
        try:
            return await method(self, stream, *args, **kwargs)
        except ConvoStoreError as error:
            _named(error, key, stream)
            raise
        finally:
            _ADDRESS.reset(token)

    return call
