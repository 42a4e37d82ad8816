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
mangled would otherwise silently buy no consistency. The request's envelope
(`api.middleware.RequestEnvelope`) reads the token into the request's
`replicas.Consistency` and answers the position of its writes.
"""

from __future__ import annotations

CONSISTENCY_HEADER = "Convo-Consistency"
