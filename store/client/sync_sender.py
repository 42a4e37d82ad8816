"""The blocking client's sending: one `Call` (store.client.calls) at a time, retried
as its `RetryPolicy` says (store.client.retrying), an error answer raised as
the library's exception (store.client.problems). `ConvoClient` builds on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Self, TypeVar

import httpx

from store.client.problems import error_from
from store.client.retrying import RetryPolicy, retrying
from store.client.wire import DEFAULT_TIMEOUT, Call, client_headers

T = TypeVar("T")


class Sender:
    """The requests of one API key (so one tenant); `ConvoClient` says
    what each argument is."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        idempotency_keys: bool = True,
        http: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.idempotency_keys = idempotency_keys
        self._sleep = sleep
        self._owned = http is None
        self.http = http or httpx.Client(
            base_url=base_url,
            headers=client_headers(api_key),
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            self.http.close()

    def call(self, call: Call[T]) -> T:
        """Send `call`, retrying as `retry` says; its answer, or the error it stands for."""
        for attempt in retrying(self.retry, replayable=call.replayable, sleep=self._sleep):
            with attempt:
                response = self.http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.body,
                    headers=call.headers,
                )
                if response.is_error:
                    raise error_from(
                        response,
                        conversation_id=call.conversation_id,
                        idempotency_key=call.idempotency_key,
                    )
                return call.read(response)
        raise AssertionError("tenacity stops by raising")  # pragma: no cover
