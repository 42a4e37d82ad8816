"""Rate limits per API key (api.ratelimit): a token bucket of requests and
one of request-body bytes; over either, a 429 `RateLimited` with
Retry-After and problem details, nothing written, counted in /metrics;
other keys unaffected. Off by default."""

from __future__ import annotations

import re

import httpx
import pytest

from api.app import create_app
from api.deps import Services
from api.ratelimit import Bucket, KeyRateLimits, RateLimited
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.memory import MemoryStorage
from tests.api.conftest import BASE_URL, auth, brief


def _app(settings: Settings) -> tuple[httpx.AsyncClient, str, str]:
    keys = MemoryKeys()
    first, second = keys.create("acme", "one"), keys.create("acme", "two")
    services = Services(
        storage=MemoryStorage(), tenant_for_key=keys.tenant_for_key, limits=Limits()
    )
    transport = httpx.ASGITransport(app=create_app(settings, services=services))
    return httpx.AsyncClient(transport=transport, base_url=BASE_URL), first, second


def test_a_bucket_pays_what_it_holds_and_says_how_long_until_it_can() -> None:
    bucket = Bucket(rate=10, burst=5, tokens=5, updated=0.0)
    assert bucket.wait_for(5) == 0
    bucket.tokens = 0
    assert bucket.wait_for(1) == pytest.approx(0.1)
    bucket.refill(0.5)
    assert bucket.tokens == 5  # never more than the burst
    assert bucket.wait_for(50) == 0  # larger than the burst: paid from a full bucket


def test_a_refusal_takes_nothing_from_either_bucket() -> None:
    limits = KeyRateLimits(requests_per_s=1, request_burst=3, bytes_per_s=10, bytes_burst=10)
    limits.charge("k", 10)
    with pytest.raises(RateLimited) as refused:
        limits.charge("k", 5)  # the bytes are over; the request is not taken
    assert refused.value.limit == "bytes"
    limits.charge("k", 0)
    limits.charge("k", 0)
    with pytest.raises(RateLimited) as refused:
        limits.charge("k", 0)
    assert refused.value.limit == "requests"
    assert 0 < refused.value.retry_after <= 1


async def test_a_key_over_its_request_rate_gets_429_with_retry_after_and_others_do_not() -> None:
    client, key, other = _app(Settings(rate_limit_per_s=0.5, rate_limit_burst=3))
    async with client:
        answers = [(await client.get("/conversations", headers=auth(key))) for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        refused = answers[-1]
        assert brief(refused)["type"] == "RateLimited"
        assert "0.5 requests a second" in refused.json()["detail"]
        assert refused.json()["limit"] == "requests"
        assert refused.headers["Retry-After"] == "2"
        assert refused.json()["retry_after"] == 2
        # Another key of the same tenant has buckets of its own.
        assert (await client.get("/conversations", headers=auth(other))).status_code == 200
        # Health and metrics need no key and are never limited.
        assert (await client.get("/health")).status_code == 200
        metrics = (await client.get("/metrics")).text
    assert re.search(r'^convo_rate_limited_total\{limit="requests"\} 1\.0$', metrics, re.M)


async def test_a_key_over_its_byte_rate_gets_429_and_nothing_is_written() -> None:
    client, key, _ = _app(Settings(rate_limit_bytes_per_s=1000, rate_limit_bytes_burst=2000))
    async with client:
        client.headers.update(auth(key))
        assert (await client.post("/conversations", json={"id": "c"})).status_code == 201
        big = {"messages": [{"role": "user", "content": "x" * 1500}]}
        assert (await client.post("/conversations/c/messages", json=big)).status_code == 201
        refused = await client.post("/conversations/c/messages", json=big)
        assert refused.status_code == 429, refused.text
        assert refused.json()["limit"] == "bytes"
        assert int(refused.headers["Retry-After"]) >= 1
        window = (await client.get("/conversations/c/window")).json()
        # Reads send no body: not limited by bytes; the refused append wrote nothing.
        assert len(window) == 1


async def test_rate_limits_are_off_by_default() -> None:
    client, key, _ = _app(Settings())
    async with client:
        for _ in range(50):
            assert (await client.get("/conversations", headers=auth(key))).status_code == 200
