"""Rate limits per API key: one runaway agent cannot take the whole service.

Each key has two token buckets (when the settings set them; 0 turns one
off): one of requests (`CONVO_RATE_LIMIT_PER_S`, up to
`CONVO_RATE_LIMIT_BURST` at once) and one of request-body bytes — what
appends and other writes send (`CONVO_RATE_LIMIT_BYTES_PER_S`, up to
`CONVO_RATE_LIMIT_BYTES_BURST`). A request is charged after its key is
found (`api.deps.get_tenant`), before anything is read or written; one the
buckets cannot pay for is refused with 429 `RateLimited`, a
`Retry-After` of the seconds until they can, and problem details naming
the limit. A body larger than its bucket's burst is let through when the
bucket is full, and leaves it in debt (so it is never refused forever).

The buckets live in the process: with `convo serve --workers N` a key
gets up to N times the rate (each worker refills its own), which bounds a
runaway client all the same. A token bucket is these few lines; the
rate-limit libraries at hand count fixed or sliding windows of hits, not
tokens that a request of any weight (a body's bytes) draws on, with the
wait until they suffice.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass

from api.problems import ProblemResponse, problem_response

# Keys whose buckets are remembered, at most (the oldest used is forgotten:
# it starts again full, which only ever errs towards letting a request in).
MAX_KEYS = 100_000


class RateLimited(Exception):
    """A key's requests or bytes are over its rate: 429 with Retry-After."""

    def __init__(self, limit: str, detail: str, retry_after: float) -> None:
        self.limit = limit  # "requests" or "bytes"
        self.retry_after = retry_after
        super().__init__(detail)

    def response(self) -> ProblemResponse:
        seconds = max(1, math.ceil(self.retry_after))
        return problem_response(
            429,
            "RateLimited",
            str(self),
            headers={"Retry-After": str(seconds)},
            retry_after=seconds,
            limit=self.limit,
        )


@dataclass
class Bucket:
    """`rate` tokens a second, at most `burst` held; starts full."""

    rate: float
    burst: float
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, cost: float) -> float:
        """Seconds until the bucket can pay `cost` (0: now)."""
        needed = min(cost, self.burst)
        return 0.0 if self.tokens >= needed else (needed - self.tokens) / self.rate


class KeyRateLimits:
    """The buckets of every key seen (see the module)."""

    def __init__(
        self,
        *,
        requests_per_s: float = 0.0,
        request_burst: int = 0,
        bytes_per_s: int = 0,
        bytes_burst: int = 0,
    ) -> None:
        self.requests_per_s = requests_per_s
        # A burst of 0 means the default: two seconds' worth (at least one request).
        self.request_burst = float(request_burst or max(1.0, 2 * requests_per_s))
        self.bytes_per_s = float(bytes_per_s)
        self.bytes_burst = float(bytes_burst or 2 * bytes_per_s)
        self._buckets: OrderedDict[str, tuple[Bucket | None, Bucket | None]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.requests_per_s > 0 or self.bytes_per_s > 0

    def _buckets_of(self, key: str, now: float) -> tuple[Bucket | None, Bucket | None]:
        found = self._buckets.get(key)
        if found is not None:
            self._buckets.move_to_end(key)
            return found
        made = (
            Bucket(self.requests_per_s, self.request_burst, self.request_burst, now)
            if self.requests_per_s > 0
            else None,
            Bucket(self.bytes_per_s, self.bytes_burst, self.bytes_burst, now)
            if self.bytes_per_s > 0
            else None,
        )
        self._buckets[key] = made
        if len(self._buckets) > MAX_KEYS:
            self._buckets.popitem(last=False)
        return made

    def charge(self, key: str, body_bytes: int) -> None:
        """Take one request and `body_bytes` from `key`'s buckets, or raise
        `RateLimited` having taken nothing."""
        now = time.monotonic()
        requests, sent = self._buckets_of(key, now)
        waits: list[tuple[float, str, str]] = []
        if requests is not None:
            requests.refill(now)
            if wait := requests.wait_for(1):
                waits.append(
                    (
                        wait,
                        "requests",
                        f"this API key is over its rate of {self.requests_per_s:g} requests"
                        f" a second (bursts of {self.request_burst:g})",
                    )
                )
        if sent is not None and body_bytes:
            sent.refill(now)
            if wait := sent.wait_for(body_bytes):
                waits.append(
                    (
                        wait,
                        "bytes",
                        f"this API key is over its rate of {self.bytes_per_s:g} request-body"
                        f" bytes a second (bursts of {self.bytes_burst:g}); this request"
                        f" sends {body_bytes}",
                    )
                )
        if waits:
            wait, limit, detail = max(waits)
            raise RateLimited(limit, f"{detail}: retry after {math.ceil(wait)} s", wait)
        if requests is not None:
            requests.tokens -= 1
        if sent is not None:
            sent.tokens -= body_bytes
