"""A write retried while the store refuses it as busy, as a client retries.

`ConversationBusy` means nothing was written: the gate refused the writer
before it took a connection (`store.postgres.conversation_gate`: no writer
of the conversation got through for two seconds), or the database's lock
timeout rolled the write back. On a loaded CI machine a stall that long
happens; the concurrency tests check what is stored, so their writers
retry as the error tells a client to (sooner than its `retry_after`, to
keep the tests short).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from store.domain.errors import ConversationBusy

T = TypeVar("T")
P = ParamSpec("P")

ATTEMPTS = 50
PAUSE_S = 0.1


async def retried_while_busy(
    write: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
) -> T:
    """`await write(*args, **kwargs)`, again while it raises `ConversationBusy`."""
    for _ in range(ATTEMPTS - 1):
        try:
            return await write(*args, **kwargs)
        except ConversationBusy:
            await asyncio.sleep(PAUSE_S)
    return await write(*args, **kwargs)
