"""GET /metrics: Prometheus' text format, no key, counted by route template
and status (one process here; `test_metrics_workers.py` scrapes two)."""

from __future__ import annotations

import asyncio
import re
import uuid

import httpx
import pytest
from fastapi import FastAPI

from api.deps import Services
from api.metrics import Metrics
from store.domain.errors import ConversationBusy, StorageUnavailable
from store.postgres import PostgresStorage
from tests.api.conftest import TOOL_TURN, new_conversation

LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
LABEL_PAIR = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"'
SAMPLE = re.compile(rf"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{{{LABEL}(?:,{LABEL})*\}})? (\S+)$")


def _normal(name: str, labels: str | None) -> str:
    """`name{labels}` with the labels in name order, as the tests spell them."""
    if not labels:
        return name
    pairs = sorted(re.findall(LABEL_PAIR, labels[1:-1]))
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value, for every sample line; every line must parse."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* \S", line), line
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        found[_normal(match[1], match[2])] = float(match[3])
    return found


async def scrape(client: httpx.AsyncClient) -> dict[str, float]:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(response.text)


async def test_metrics_need_no_key(client: httpx.AsyncClient) -> None:
    assert "Authorization" not in client.headers
    metrics = await scrape(client)
    assert metrics["convo_appends_total"] == 0
    assert metrics['convo_storage_errors_total{type="StorageUnavailable"}'] == 0


async def test_requests_are_counted_by_route_template_and_status(
    acme: httpx.AsyncClient,
) -> None:
    conversation = await new_conversation(acme)
    for _ in range(2):
        assert (await acme.get(f"/conversations/{conversation}/window")).status_code == 200
    missing = uuid.uuid4()
    assert (await acme.get(f"/conversations/{missing}/window")).status_code == 404
    assert (await acme.get("/no/such/route")).status_code == 404

    metrics = await scrape(acme)
    window = 'method="GET",route="/conversations/{conversation_id}/window"'
    assert metrics[f'convo_http_requests_total{{{window},status="200"}}'] == 2
    assert metrics[f'convo_http_requests_total{{{window},status="404"}}'] == 1
    assert metrics['convo_http_requests_total{method="GET",route="<unmatched>",status="404"}'] == 1
    # No id ever becomes a label.
    text = (await acme.get("/metrics")).text
    assert conversation not in text
    assert str(missing) not in text

    ok = f'{window},status="200"'
    assert metrics[f"convo_http_request_duration_seconds_count{{{ok}}}"] == 2
    assert metrics[f'convo_http_request_duration_seconds_count{{{window},status="404"}}'] == 1
    inf = f'le="+Inf",{window},status="200"'
    assert metrics[f"convo_http_request_duration_seconds_bucket{{{inf}}}"] == 2
    assert metrics[f"convo_http_request_duration_seconds_sum{{{ok}}}"] > 0
    buckets = sorted(
        (float(re.findall(r'le="([^"]+)"', name)[0]), value)
        for name, value in metrics.items()
        if name.startswith("convo_http_request_duration_seconds_bucket{") and ok in name
    )
    values = [value for _, value in buckets]
    assert values == sorted(values), "histogram buckets must be cumulative"


async def test_appends_and_messages_are_counted_and_replays_are_not(
    acme: httpx.AsyncClient,
) -> None:
    conversation = await new_conversation(acme)
    url = f"/conversations/{conversation}/messages"
    headers = {"Idempotency-Key": "append-1"}
    first = await acme.post(url, json={"messages": TOOL_TURN}, headers=headers)
    assert first.status_code == 201
    replay = await acme.post(url, json={"messages": TOOL_TURN}, headers=headers)
    assert replay.status_code == 200
    second = await acme.post(url, json={"messages": [{"role": "user", "content": "more"}]})
    assert second.status_code == 201

    metrics = await scrape(acme)
    assert metrics["convo_appends_total"] == 2
    assert metrics["convo_messages_appended_total"] == len(TOOL_TURN) + 1


async def test_storage_errors_are_counted_by_type(
    app: FastAPI, acme: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversation = await new_conversation(acme)
    storage = app.state.services.storage
    failures = iter([StorageUnavailable("down", retry_after=1.0), ConversationBusy(conversation)])

    async def failing(*args: object, **kwargs: object) -> None:
        raise next(failures)

    monkeypatch.setattr(storage, "ping", failing)
    unavailable = await acme.get("/ready")
    busy = await acme.get("/ready")
    assert (unavailable.status_code, busy.status_code) == (503, 409)

    metrics = await scrape(acme)
    assert metrics['convo_storage_errors_total{type="StorageUnavailable"}'] == 1
    assert metrics['convo_storage_errors_total{type="ConversationBusy"}'] == 1
    assert metrics['convo_storage_errors_total{type="StorageError"}'] == 0
    assert metrics['convo_http_requests_total{method="GET",route="/ready",status="503"}'] == 1


async def test_pool_gauges_on_postgres_only(
    backend: str, acme: httpx.AsyncClient, app: FastAPI
) -> None:
    await new_conversation(acme)
    metrics = await scrape(acme)
    if backend == "memory":  # no pool: every pool figure reads 0
        assert {v for k, v in metrics.items() if k.startswith("convo_pool")} == {0}
        return
    assert metrics["convo_pool_max"] >= metrics["convo_pool_size"] >= 1
    assert 0 <= metrics["convo_pool_available"] <= metrics["convo_pool_size"]
    in_use = metrics["convo_pool_size"] - metrics["convo_pool_available"]
    assert metrics["convo_pool_in_use"] == in_use
    assert metrics["convo_pool_requests_waiting"] == 0
    assert metrics["convo_pool_requests_num_total"] >= 1


def test_label_values_are_escaped() -> None:
    metrics = Metrics()
    metrics.observe_request("GET", 'a"b\\c\nd', 200, 0.002)
    text = metrics.render().decode()
    assert 'route="a\\"b\\\\c\\nd"' in text
    samples(text)  # every line still parses


async def test_the_feed_lag_is_the_age_of_the_oldest_open_transaction(
    backend: str, acme: httpx.AsyncClient, services: Services
) -> None:
    assert (await scrape(acme))["convo_feed_lag_seconds"] >= 0
    if backend == "memory":
        assert (await scrape(acme))["convo_feed_lag_seconds"] == 0
        return
    storage = services.storage
    assert isinstance(storage, PostgresStorage)
    async with storage.pool.connection() as held:
        # A transaction with an id, held open: the feed cannot pass it.
        await held.execute("BEGIN")
        await held.execute("SELECT pg_current_xact_id()")
        await asyncio.sleep(0.3)
        assert (await scrape(acme))["convo_feed_lag_seconds"] >= 0.3
        await held.execute("ROLLBACK")
