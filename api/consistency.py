"""Read-your-writes across processes: the `Convo-Consistency` header.

With read replicas (`CONVO_REPLICA_URLS`), a response to a request that
wrote carries `Convo-Consistency: <lsn>`, the WAL position its commit is
at. A later request that sends that header back reads nothing older than
that write, whichever worker answers it: a standby only once it has
replayed past the position, else the primary (`store.postgres.replicas`).
The process that wrote knows its own conversations' last writes without
the header; the header is for a client whose next request may land on
another worker or replica set member.

A header that is not an LSN (`16/B374D848`) is a 422: a token the client
mangled would otherwise silently buy no consistency.
"""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from api.asgi import HttpMiddleware
from api.problems import problem_response
from store.postgres.replicas import format_lsn, parse_lsn, read_after

CONSISTENCY_HEADER = "Convo-Consistency"


class ReadConsistency(HttpMiddleware):
    """Reads the client's token into the request's `replicas.Consistency`,
    and answers the position of the request's writes."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = Headers(scope=scope).get(CONSISTENCY_HEADER)
        try:
            after = None if given is None else parse_lsn(given.strip())
        except ValueError as error:
            detail = f"{CONSISTENCY_HEADER}: {error}"
            pointer = {"pointer": f"/headers/{CONSISTENCY_HEADER}", "detail": str(error)}
            await problem_response(422, "ValidationError", detail, errors=[pointer])(
                scope, receive, send
            )
            return
        with read_after(after) as consistency:

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start" and consistency.written is not None:
                    MutableHeaders(scope=message)[CONSISTENCY_HEADER] = format_lsn(
                        consistency.written
                    )
                await send(message)

            await self.app(scope, receive, sending)
