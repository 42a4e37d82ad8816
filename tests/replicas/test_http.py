"""The HTTP service on a primary and its standby: a write's response
carries `Convo-Consistency`, and a request that sends it back (to another
worker, here another app) reads the write even while the standby's replay
is paused; a mangled token is a 422; `/metrics` shows the standby."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from api.app import create_app
from api.consistency import CONSISTENCY_HEADER
from bench.standby import StandbyPair
from hosting.engines import make_async_engine
from hosting.keys import create_key
from hosting.settings import Settings
from store.postgres.replicas import parse_lsn

pytestmark = [pytest.mark.slow]


@asynccontextmanager
async def serving(pair: StandbyPair, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An app (a worker) on the pair, reading from the standby."""
    with_replicas = settings.model_copy(update={"replica_urls": (pair.standby.url("convo"),)})
    app = create_app(with_replicas, database_url=pair.primary.url("convo"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://convo") as client:
            yield client


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
        created = await writer.post("/conversations", json={}, headers=auth)
        assert created.status_code == 201
        parse_lsn(created.headers[CONSISTENCY_HEADER])
        cid = created.json()["id"]
        pair.wait_replayed()
        pair.standby.execute("SELECT pg_wal_replay_pause()")
        try:
            appended = await writer.post(
                f"/conversations/{cid}/messages",
                json={"messages": [{"role": "user", "content": "hello"}]},
                headers=auth,
            )
            assert appended.status_code == 201
            token = appended.headers[CONSISTENCY_HEADER]
            assert parse_lsn(token) >= parse_lsn(created.headers[CONSISTENCY_HEADER])
            # Reads do not write: no token in their answers.
            window = await writer.get(f"/conversations/{cid}/window", headers=auth)
            assert CONSISTENCY_HEADER not in window.headers
            assert [m["content"] for m in window.json()] == ["hello"]
            # Another worker: its history page is read on the paused standby,
            # unless the token says what it must see.
            path = f"/conversations/{cid}/messages"
            stale = await reader.get(path, headers=auth)
            assert stale.json()["items"] == []
            fresh = await reader.get(path, headers={**auth, CONSISTENCY_HEADER: token})
            assert [m["content"] for m in fresh.json()["items"]] == ["hello"]
        finally:
            pair.standby.execute("SELECT pg_wal_replay_resume()")
        for mangled in ("nonsense", "1/2/3", "G/0", "123456789/0", "0/" + "F" * 40):
            refused = await reader.get(path, headers={**auth, CONSISTENCY_HEADER: mangled})
            assert refused.status_code == 422
            assert refused.json()["type"] == "ValidationError"
        metrics = (await reader.get("/metrics")).text
        assert "convo_replica_lag_seconds{" in metrics
        assert 'convo_reads_routed_total{reader="analyst",server="replica"}' in metrics
