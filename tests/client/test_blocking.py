"""The blocking client's own parts: it runs the async client on a loop of its
own in a thread (store.client.blocking), so what it is given to send through
— a blocking transport, a caller's `httpx.Client` — must still be used, a
caller's client left open, and a client let go unclosed must leave no thread
behind."""

from __future__ import annotations

import gc
import threading
import time

import httpx

from store.client import ConvoClient
from tests.client.test_retry import CONVERSATION


class Recording(httpx.BaseTransport):
    """A blocking-only transport (no `handle_async_request`) answering one
    conversation and keeping each request it was handed."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json=CONVERSATION)


def _portal_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "convo-client")


def test_a_blocking_transport_is_sent_through() -> None:
    transport = Recording()
    with ConvoClient("http://convo", api_key="cs_key", transport=transport) as client:
        assert client.get_conversation("c").id == "c"
    (sent,) = transport.requests
    assert sent.url.path == "/conversations/c"
    assert sent.headers["Authorization"] == "Bearer cs_key"


def test_a_callers_client_is_used_with_its_headers_and_left_open() -> None:
    transport = Recording()
    http = httpx.Client(
        base_url="http://convo",
        transport=transport,
        headers={"X-API-Key": "cs_theirs", "X-Team": "a"},
    )
    client = ConvoClient(http=http)
    assert client.get_conversation("c").id == "c"
    client.close()
    (sent,) = transport.requests
    assert sent.headers["X-API-Key"] == "cs_theirs"
    assert sent.headers["X-Team"] == "a"
    assert not http.is_closed  # closing it is the caller's
    http.close()


def test_a_client_let_go_unclosed_leaves_no_thread() -> None:
    before = _portal_threads()
    client = ConvoClient("http://convo", transport=Recording())
    client.get_conversation("c")
    assert _portal_threads() == before + 1
    del client
    gc.collect()
    deadline = time.monotonic() + 5
    while _portal_threads() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _portal_threads() == before


def test_closing_twice_is_harmless() -> None:
    client = ConvoClient("http://convo", transport=Recording())
    client.close()
    client.close()
