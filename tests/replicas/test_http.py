"""The HTTP service on a primary and its standby: a write's response
carries `Convo-Consistency`, and a request that sends it back (to another
worker, here another app) reads the write even while the standby's replay
is paused; a mangled token is a 422; `/metrics` shows the standby."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from api.consistency import CONSISTENCY_HEADER
from bench.standby import StandbyPair
from hosting.engines import make_async_engine
from hosting.keys import create_key
from hosting.settings import Settings
from store.postgres.replicas import parse_lsn

pytestmark = [pytest.mark.slow]


@dataclass
class Worker:
    """An app (a worker) on the pair and a client of it."""

    app: FastAPI
    http: httpx.AsyncClient

    async def look_at_standbys(self) -> None:
        """Have the worker's router look at the standby now, as its next
        poll would: the test then knows what the router knows."""
        replicas = self.app.state.services.storage.replicas
        await replicas.poll()


@asynccontextmanager
async def serving(pair: StandbyPair, settings: Settings) -> AsyncIterator[Worker]:
    """A worker on the pair, reading from the standby. Its lag bound is
    long: a standby paused on purpose must stay in use however slowly a
    loaded machine runs the test (the bound is test_routing's)."""
    with_replicas = settings.model_copy(
        update={"replica_urls": (pair.standby.url("convo"),), "replica_max_lag_ms": 60_000}
    )
    app = create_app(with_replicas, database_url=pair.primary.url("convo"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://convo") as client:
            yield Worker(app, client)


async def test_a_token_sent_back_reads_the_write_on_another_worker(
    pair: StandbyPair, settings: Settings
) -> None:
    engine = make_async_engine(pair.primary.url("convo"), settings, pool_size=1, max_overflow=0)
    try:
        _, key = await create_key(engine, "acme", "replicas")
    finally:
        await engine.dispose()
    auth = {"Authorization": f"Bearer {key}"}
    async with serving(pair, settings) as writer, serving(pair, settings) as reader:
        created = await writer.http.post("/conversations", json={}, headers=auth)
        assert created.status_code == 201
        parse_lsn(created.headers[CONSISTENCY_HEADER])
        cid = created.json()["id"]
        pair.wait_replayed()
        pair.pause_replay()
        await reader.look_at_standbys()  # it has seen the standby with the conversation
        try:
            appended = await writer.http.post(
                f"/conversations/{cid}/messages",
                json={"messages": [{"role": "user", "content": "hello"}]},
                headers=auth,
            )
            assert appended.status_code == 201
            token = appended.headers[CONSISTENCY_HEADER]
            assert parse_lsn(token) >= parse_lsn(created.headers[CONSISTENCY_HEADER])
            # Reads do not write: no token in their answers.
            window = await writer.http.get(f"/conversations/{cid}/window", headers=auth)
            assert CONSISTENCY_HEADER not in window.headers
            assert [m["content"] for m in window.json()] == ["hello"]
            # Another worker: its history page is read on the paused standby,
            # unless the token says what it must see.
            path = f"/conversations/{cid}/messages"
            stale = await reader.http.get(path, headers=auth)
            assert stale.json()["items"] == []
            fresh = await reader.http.get(path, headers={**auth, CONSISTENCY_HEADER: token})
            assert [m["content"] for m in fresh.json()["items"]] == ["hello"]
        finally:
            pair.resume_replay()
        for mangled in ("nonsense", "1/2/3", "G/0", "123456789/0", "0/" + "F" * 40):
            refused = await reader.http.get(path, headers={**auth, CONSISTENCY_HEADER: mangled})
            assert refused.status_code == 422
            assert refused.json()["type"] == "ValidationError"
        metrics = (await reader.http.get("/metrics")).text
        assert "convo_replica_lag_seconds{" in metrics
        assert 'convo_reads_routed_total{reader="analyst",server="replica"}' in metrics
