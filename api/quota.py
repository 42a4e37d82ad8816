"""Caps per tenant: how many conversations it may hold, and how many bytes
of log (`CONVO_TENANT_MAX_CONVERSATIONS`, `CONVO_TENANT_MAX_STORED_BYTES`;
0, the default, is no cap).

A write over a cap is refused before anything is written, with 403
`QuotaExceeded` naming the cap and the figures: creating or forking a
conversation when the tenant holds its cap of them; any write whose body
would take the tenant's log past its cap of bytes. Reads, deletes and
everything else go on, so a tenant at its cap can still read, and free
room by deleting.

The figures come from the storage (`tenant_usage`: a scan of the tenant's
log on PostgreSQL, `store.postgres.usage`), asked at most every
`USAGE_TTL_S` seconds per tenant; in between, what this process admitted
is added to them. So a cap is kept to within what other processes (other
workers, replicas) write in those few seconds, and a fork's copied log is
counted from the next time the figures are asked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from api.problems import ProblemResponse, problem_response

USAGE_TTL_S = 5.0
# Routes (method, template) that create a conversation.
CREATING = frozenset(
    {("POST", "/conversations"), ("POST", "/conversations/{conversation_id}/fork")}
)


class QuotaExceeded(Exception):
    """A write would take a tenant past one of its caps: 403."""

    def __init__(self, cap: str, detail: str) -> None:
        self.cap = cap  # "conversations" or "stored_bytes"
        super().__init__(detail)

    def response(self) -> ProblemResponse:
        return problem_response(403, "QuotaExceeded", str(self), cap=self.cap)


@dataclass
class _Usage:
    conversations: int
    stored_bytes: int
    asked_at: float


class TenantQuotas:
    """The caps, and each tenant's figures as last asked plus what was admitted since."""

    def __init__(self, *, max_conversations: int = 0, max_stored_bytes: int = 0) -> None:
        self.max_conversations = max_conversations
        self.max_stored_bytes = max_stored_bytes
        self._usage: dict[str, _Usage] = {}

    @property
    def enabled(self) -> bool:
        return self.max_conversations > 0 or self.max_stored_bytes > 0

    async def _usage_of(self, tenant: str, storage: Any) -> _Usage:
        now = time.monotonic()
        usage = self._usage.get(tenant)
        if usage is None or now - usage.asked_at > USAGE_TTL_S:
            conversations, stored = await storage.tenant_usage(tenant)
            usage = self._usage[tenant] = _Usage(conversations, stored, now)
        return usage

    async def admit(self, tenant: str, storage: Any, *, creates: bool, body_bytes: int) -> None:
        """Count the write against the tenant's caps, or raise `QuotaExceeded`
        having counted nothing."""
        if not (creates and self.max_conversations) and not (body_bytes and self.max_stored_bytes):
            return
        usage = await self._usage_of(tenant, storage)
        if creates and self.max_conversations and usage.conversations >= self.max_conversations:
            raise QuotaExceeded(
                "conversations",
                f"tenant {tenant!r} holds {usage.conversations} conversations, its cap"
                f" of {self.max_conversations}: delete one to make room",
            )
        if self.max_stored_bytes and usage.stored_bytes + body_bytes > self.max_stored_bytes:
            raise QuotaExceeded(
                "stored_bytes",
                f"tenant {tenant!r} stores {usage.stored_bytes} bytes; this write of"
                f" {body_bytes} would pass its cap of {self.max_stored_bytes}",
            )
        usage.conversations += int(creates)
        usage.stored_bytes += body_bytes
