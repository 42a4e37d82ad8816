"""Revocation reaches open streams: a response that streams for long (the
live tail `GET /events/stream`, an export) ends soon after its key stops
being valid, with a last message saying why.

A key is checked when a request starts (`api.deps.get_tenant`). A stream
outlives that check by minutes or hours, so while it is open its key is
asked again every `RECHECK_S` seconds (`KeyWatch.ended`). With the server's
`hosting.keys.KeyLookup` that costs nothing most of the time: a remembered
key is answered from memory after a non-blocking look at the revocations
NOTIFYed to the process, so a revoked key is seen at the first check after
the revocation committed. When the look-up no longer gives the stream's
tenant — the key was revoked, or expired, or now belongs to no one — the
stream sends its last message, a problem (`Unauthorized`, 401), and ends:

    event: error                                   (Server-Sent Events)
    data: {"type": "Unauthorized", "status": 401, "detail": "…", …}

    {"type": "error", "problem": {"type": "Unauthorized", …}}   (JSON Lines)

A look-up that fails (the database is down, the key cannot be asked) ends
nothing: the stream's own reads fail then, and say so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg

from api.logging import request_id
from api.problems import title_of
from store.domain.errors import ConvoStoreError

# How often an open stream asks again whether its key is valid: the issue's
# promise is that a revoked key's stream ends within a second.
RECHECK_S = 0.25

ENDED_DETAIL = "the API key was revoked or has expired: the stream ends"

KeyLookup = Callable[[str], Any]  # api.deps.KeyLookup: key → awaitable tenant or None


def ended_problem() -> dict[str, Any]:
    """The problem the last message of a stream whose key ended carries."""
    problem: dict[str, Any] = {
        "type": "Unauthorized",
        "title": title_of("Unauthorized", 401),
        "status": 401,
        "detail": ENDED_DETAIL,
    }
    instance = request_id.get()
    if instance is not None:
        problem["instance"] = instance
    return problem


def sse_ended() -> bytes:
    return b"event: error\ndata: " + orjson.dumps(ended_problem()) + b"\n\n"


def json_lines_ended() -> bytes:
    return orjson.dumps({"type": "error", "problem": ended_problem()}) + b"\n"


@dataclass(frozen=True)
class KeyWatch:
    """The key a stream was opened with, and the tenant it acted for."""

    key: str
    tenant: str
    tenant_for_key: KeyLookup
    recheck_s: float = RECHECK_S

    async def ended(self) -> None:
        """Return once the key no longer gives the tenant (checked every
        `recheck_s` seconds)."""
        while True:
            await asyncio.sleep(self.recheck_s)
            try:
                tenant = await self.tenant_for_key(self.key)
            except (ConvoStoreError, psycopg.Error, OSError):
                continue  # not known to be revoked: the stream's reads say what failed
            if tenant != self.tenant:
                return

    async def guard(self, chunks: AsyncIterator[bytes], last: bytes) -> AsyncIterator[bytes]:
        """`chunks`, until the key ends; then `last`, and no more."""
        ended = asyncio.ensure_future(self.ended())
        step: asyncio.Future[bytes] | None = None
        try:
            while not ended.done():
                step = asyncio.ensure_future(anext(chunks))
                await asyncio.wait({step, ended}, return_when=asyncio.FIRST_COMPLETED)
                if ended.done():
                    break
                try:
                    chunk = step.result()
                except StopAsyncIteration:
                    return
                step = None
                yield chunk
            ended.result()  # a bug in the watch is raised, not taken for a revocation
            yield last
        finally:
            for task in (step, ended):
                if task is None:
                    continue
                task.cancel()
                # Awaited (or its outcome read) so nothing is left pending or unretrieved.
                with contextlib.suppress(BaseException):
                    await task
            await _closed(chunks)


async def _closed(chunks: AsyncIterator[bytes]) -> None:
    close = getattr(chunks, "aclose", None)
    if close is not None:
        await close()
