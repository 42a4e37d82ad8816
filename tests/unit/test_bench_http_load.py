"""bench.http_load's load generator, run for a fraction of a second against the
app served by uvicorn in this event loop (in-memory storage, a loopback port):
it sends what the routes accept, and counts what it should. No timing is
asserted."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator

import pytest_asyncio
import uvicorn

from api.app import create_app
from api.deps import Services
from bench.http_load import (
    Client,
    closed_loop,
    http_appends,
    http_assembles,
    http_conversation,
    open_loop,
    path,
    percentile,
    process_tree_cpu_s,
    table_rows,
)
from bench.summary import _http_load
from hosting.keys import MemoryKeys
from hosting.settings import Settings
from store.domain.commands import Limits
from store.memory import MemoryStorage
from store.repository import DEFAULT_TENANT


@pytest_asyncio.fixture
async def http() -> AsyncIterator[Client]:
    keys = MemoryKeys()
    key = keys.create(DEFAULT_TENANT, "bench")
    services = Services(
        storage=MemoryStorage(), tenant_for_key=keys.tenant_for_key, limits=Limits()
    )
    app = create_app(Settings.from_env(), services=services)
    # Bound and listening before the server starts: connections wait in its
    # backlog until uvicorn accepts them.
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield Client(
            f"http://127.0.0.1:{port}",
            {"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
    finally:
        server.should_exit = True
        await serving


async def test_closed_loop_appends_with_tool_calls_and_expected_versions(http: Client) -> None:
    connections = [http.connection() for _ in range(3)]
    senders = await http_appends(connections, cap=40)
    load = await closed_loop(senders, 40, warmup_s=0.02, window_s=0.2)
    for connection in connections:
        await connection.close()
    assert load.errors == {}
    assert load.latencies
    assert 0 < load.sent <= 3 * 40
    figures = load.figures()
    assert figures["median_ms"] is not None
    assert figures["p99_ms"] >= figures["median_ms"]


async def test_closed_loop_assembles(http: Client) -> None:
    connection = http.connection()
    cid, version = await http_conversation(connection)
    body = b'{"messages":[{"role":"user","content":"hi"}],"expected_version":%d}' % version
    assert (await connection.post(path(cid, "messages"), body)).status == 201
    load = await closed_loop(http_assembles([connection], [cid]), 10**9, 0.0, 0.1)
    await connection.close()
    assert load.errors == {}
    assert load.sent > 0


async def test_a_client_that_runs_out_of_requests_is_marked_capped() -> None:
    async def send(i: int) -> str | None:
        await asyncio.sleep(0)
        return None if i % 2 else "409"

    load = await closed_loop([send], cap=10, warmup_s=0.0, window_s=5.0)
    assert load.capped
    assert load.sent == 10
    assert load.errors == {"409": 5}


async def test_open_loop_sends_on_schedule_and_skips_past_the_bound() -> None:
    release = asyncio.Event()

    async def stuck(i: int) -> str | None:
        await release.wait()
        return None

    asyncio.get_running_loop().call_later(0.15, release.set)
    load = await open_loop(stuck, rate=200, window_s=0.1, max_in_flight=5)
    assert load.max_in_flight == 5
    assert load.skipped == 20 - 5
    assert load.sent == 5


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 0.5) == 50.0
    assert percentile([3.0], 0.99) == 3.0


def test_cpu_of_this_process_tree_is_read() -> None:
    sum(i * i for i in range(200_000))
    assert process_tree_cpu_s(os.getpid()) > 0


def test_the_summary_renders_the_table() -> None:
    entry = {
        "requests_per_s": 100.0,
        "median_ms": 5.0,
        "p99_ms": 9.0,
        "this_process_cpu_per_request_us": 800.0,
        "this_process_cores": 0.1,
        "server_cores": 0.5,
        "machine_busy_cores": 1.5,
        "errors": {},
    }
    results = {"append": {"http_1w": {"1": entry}, "store": {"1": entry}}, "assemble": {}}
    rows = table_rows(results, {})
    assert [r["side"] for r in rows] == ["HTTP, 1 worker", "repository, in-process"]
    lines = _http_load({"closed_loop": results, "table": rows})
    assert "| append | HTTP, 1 worker | 1 closed | 100 | 5.00 | 9.00 | 800 |" in "\n".join(lines)
