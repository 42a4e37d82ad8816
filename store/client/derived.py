"""Client methods derived from the repository's, so the two cannot drift.

A method the client offers with the repository's signature is written once
here as a rule (send this request with these arguments), typed from the
repository's own method (`ParamSpec`): mypy checks every caller against
the repository's parameters, and `inspect.signature` shows them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from store.client.wire import Call
from store.domain.conversation_keys import ConversationRef
from store.domain.listing import MessagePage
from store.domain.messages import StoredMessage

P = ParamSpec("P")
T = TypeVar("T")


class Sends(Protocol):
    async def call(self, call: Call[T]) -> T: ...


def forwarding(
    like: Callable[Concatenate[Any, ConversationRef, P], Awaitable[T]],
    request: Callable[..., Call[T]],
) -> Callable[Concatenate[Sends, ConversationRef, P], Coroutine[Any, Any, T]]:
    """The repository method `like` as a request: `request` (a builder of
    `store.client.calls`) gets the conversation and every other argument
    by name, the repository's defaults filled in, so a left-out argument
    means what it means in process, not what the server defaults to."""
    signature = _addressed(inspect.signature(like))
    own = tuple(signature.parameters)[:2]  # self and the conversation

    @functools.wraps(like)
    async def send(
        self: Sends, conversation_id: ConversationRef, /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        bound = signature.bind(self, conversation_id, *args, **kwargs)
        bound.apply_defaults()
        arguments = {k: v for k, v in bound.arguments.items() if k not in own}
        return await self.call(request(conversation_id, **arguments))

    send.__signature__ = signature  # type: ignore[attr-defined]
    return send


def _addressed(signature: inspect.Signature) -> inspect.Signature:
    """The signature callers see: the conversation by the id they chose
    (`ConversationRef`), positional only, as the repository's decorator
    (`store.domain.conversation_keys.addressed`) takes it."""
    this, conversation, *rest = signature.parameters.values()
    first = (
        this.replace(kind=inspect.Parameter.POSITIONAL_ONLY),
        conversation.replace(kind=inspect.Parameter.POSITIONAL_ONLY, annotation="ConversationRef"),
    )
    return signature.replace(parameters=[*first, *rest])


def page_items(
    page: Callable[Concatenate[Any, P], Coroutine[Any, Any, MessagePage]], *, name: str
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, list[StoredMessage]]]:
    """A method named `name` sending `page`'s request and answering its
    messages only, the cursors left out: the same parameters, typed from
    `page`, so the two cannot drift."""

    async def items(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> list[StoredMessage]:
        return list((await page(self, *args, **kwargs)).items)

    items.__name__ = name
    items.__qualname__ = page.__qualname__.replace(page.__name__, name)
    items.__doc__ = "The messages of `page_messages`'s page, without its cursors."
    items.__signature__ = inspect.signature(page).replace(  # type: ignore[attr-defined]
        return_annotation="list[StoredMessage]"
    )
    return items
