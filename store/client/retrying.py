"""When the client tries a request again, and how long it waits first.

The service says when a retry helps: 409 `ConversationBusy` (another
writer holds the conversation) and 503 `StorageUnavailable` (the database
is unreachable or overloaded), with a `Retry-After`. Neither stored the
request, but for a 503 whose connection broke during the commit itself
(docs/errors.md): an append is then retried under its idempotency key and
answered from what was stored; another write is retried as it is, so its
retry may find its own effect (a create, `ConversationExists`). The
client waits at least that long, or, without one, a randomised exponential
backoff (full jitter, so that writers turned away together do not come
back together), and gives up after `attempts` tries by raising the last
error. A connection that could not be opened is retried too (nothing was
sent); a connection lost after the request was sent only for a request
that is safe to repeat: a read, or an append carrying its idempotency key.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import tenacity
from tenacity.wait import wait_base

from store.domain.errors import ConversationBusy, StorageUnavailable


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How the client retries a request the service turned away for now.

    `attempts`: tries in all, the first included (1: never retry).
    `backoff`: the first wait without a `Retry-After`, doubling after each.
    `max_wait`: no wait is longer, a `Retry-After` included.
    """

    attempts: int = 5
    backoff: float = 0.1
    max_wait: float = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if self.backoff < 0 or self.max_wait < 0:
            raise ValueError("backoff and max_wait cannot be negative")


NO_RETRY = RetryPolicy(attempts=1)


def retryable(replayable: bool) -> Callable[[BaseException], bool]:
    """Whether a try that failed with an error is tried again."""

    def decide(error: BaseException) -> bool:
        if isinstance(error, ConversationBusy | StorageUnavailable):
            return True
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
            return True
        return replayable and isinstance(error, httpx.TransportError)

    return decide


def wait_before_retry(policy: RetryPolicy, failures: int, error: BaseException | None) -> float:
    """The wait after `failures` failed tries in a row: at least the error's
    `retry_after` (the service's `Retry-After`), else a random wait up to
    the backoff doubled per failure; never past `max_wait`."""
    ceiling = min(policy.max_wait, policy.backoff * 2 ** max(failures - 1, 0))
    wait = random.uniform(0, ceiling)
    asked = getattr(error, "retry_after", None)
    if isinstance(asked, int | float):
        wait = max(wait, float(asked))
    return min(wait, policy.max_wait)


class _Wait(wait_base):
    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        return wait_before_retry(self.policy, retry_state.attempt_number, error)


def _settings(policy: RetryPolicy, replayable: bool) -> dict[str, object]:
    return {
        "stop": tenacity.stop_after_attempt(policy.attempts),
        "wait": _Wait(policy),
        "retry": tenacity.retry_if_exception(retryable(replayable)),
        "reraise": True,
    }


def async_retrying(
    policy: RetryPolicy,
    *,
    replayable: bool,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> tenacity.AsyncRetrying:
    """Attempts of one async request (`async for attempt in ...: with attempt:`)."""
    extra = {} if sleep is None else {"sleep": sleep}
    return tenacity.AsyncRetrying(**_settings(policy, replayable), **extra)  # type: ignore[arg-type]


def retrying(
    policy: RetryPolicy, *, replayable: bool, sleep: Callable[[float], None] | None = None
) -> tenacity.Retrying:
    """Attempts of one request (`for attempt in ...: with attempt:`)."""
    extra = {} if sleep is None else {"sleep": sleep}
    return tenacity.Retrying(**_settings(policy, replayable), **extra)  # type: ignore[arg-type]
