"""Fairness under a stuck conversation: do the other conversations' appends
and reads keep their latency while one conversation's row is locked and
dozens of appends wait on it? (store.postgres.conversation_gate)

The server is the real one, `convo serve` (one worker, its pool at the
default size) in a process of its own on 127.0.0.1 (`bench.http_load`), so
the clients' own work is not the server's. Clients send, over HTTP, a paced
mix of appends and window reads to 8 other
conversations, in two phases of the same length:

1. unloaded: nothing else happens (the baseline, measured in the same run);
2. loaded: a transaction of its own holds one conversation's row (`SELECT …
   FOR UPDATE`, never committed during the phase), and `STUCK_WRITERS`
   (60) clients, in a process of their own, append to it over and over,
   each retrying after the `Retry-After` it is answered (409
   `ConversationBusy`, or 503).

Figures: p50 and p99 latency of the other conversations' requests in each
phase, their ratio, and every answer by status in both phases (the other
conversations must see no 503 and no error). Goal: loaded p99 within 2×
the unloaded p99. Written to bench/results/fairness.json (quick mode:
bench/results/quick/, `CONVO_BENCH_QUICK=1`, shorter phases).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import httpx
import psycopg

from bench.harness import quick_mode, run_and_record
from bench.http_load import serving
from bench.report import comparison, print_table
from hosting.engines import make_async_engine
from hosting.keys import create_key
from hosting.settings import Settings, libpq_url

STUCK_WRITERS = 60
OTHER_CONVERSATIONS = 8
CLIENTS = 4  # sending to the other conversations
PACE_S = 0.02  # between one client's requests: a steady load, not a saturating one


def _phase_seconds() -> float:
    return 6.0 if quick_mode() else 30.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def _others(
    client: httpx.AsyncClient, conversations: list[str], seconds: float
) -> tuple[list[float], Counter[int]]:
    """CLIENTS clients' appends and reads to the other conversations, for `seconds`."""
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    ends = time.monotonic() + seconds

    async def one_client(number: int) -> None:
        turn = 0
        while time.monotonic() < ends:
            cid = conversations[(number + turn) % len(conversations)]
            started = time.perf_counter()
            if turn % 2 == 0:
                response = await client.post(
                    f"/conversations/{cid}/messages",
                    json={"messages": [{"role": "user", "content": f"c{number} t{turn}"}]},
                )
            else:
                response = await client.get(f"/conversations/{cid}/window?limit=20")
            latencies.append(time.perf_counter() - started)
            statuses[response.status_code] += 1
            turn += 1
            await asyncio.sleep(PACE_S)

    await asyncio.gather(*(one_client(n) for n in range(CLIENTS)))
    return latencies, statuses


async def _stuck_writers(
    base_url: str, key: str, cid: str, seconds: float
) -> tuple[Counter[int], list[float]]:
    """STUCK_WRITERS clients appending to `cid` for `seconds`, each retrying
    after the Retry-After it is given."""
    statuses: Counter[int] = Counter()
    answered_in: list[float] = []
    ends = time.monotonic() + seconds

    async def writer(client: httpx.AsyncClient, number: int) -> None:
        attempt = 0
        while (left := ends - time.monotonic()) > 0:
            started = time.perf_counter()
            try:
                response = await client.post(
                    f"/conversations/{cid}/messages",
                    json={
                        "messages": [
                            {
                                "role": "user",
                                "content": f"stuck {number}",
                                "client_message_id": f"stuck-{number}-{attempt}",
                            }
                        ]
                    },
                )
            except httpx.HTTPError:
                statuses[0] += 1
                continue
            answered_in.append(time.perf_counter() - started)
            statuses[response.status_code] += 1
            if response.status_code < 300:
                attempt += 1
            wait = float(response.headers.get("Retry-After", "0") or 0)
            await asyncio.sleep(min(max(wait, 0.05), left))

    async with httpx.AsyncClient(
        base_url=base_url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=60.0,
        limits=httpx.Limits(max_connections=STUCK_WRITERS),
        trust_env=False,
    ) as client:
        await asyncio.gather(*(writer(client, n) for n in range(STUCK_WRITERS)))
    return statuses, answered_in


def _stuck_writers_process(
    base_url: str, key: str, cid: str, seconds: float
) -> tuple[Counter[int], list[float]]:
    return asyncio.run(_stuck_writers(base_url, key, cid, seconds))


async def run(url: str, settings: Settings) -> dict[str, Any]:
    seconds = _phase_seconds()
    engine = make_async_engine(url, settings, pool_size=1, max_overflow=1)
    try:
        _, key = await create_key(engine, "fairness", "bench")
    finally:
        await engine.dispose()
    limits = httpx.Limits(max_connections=CLIENTS + 2)
    figures: dict[str, Any] = {
        "phase_seconds": seconds,
        "stuck_writers": STUCK_WRITERS,
        "clients": CLIENTS,
        "pool_size": settings.pool_size,
        "lock_timeout_ms": settings.lock_timeout_ms,
    }
    with (
        tempfile.NamedTemporaryFile("w", prefix="fairness-serve-", suffix=".log") as log,
        serving(url, 1, log) as server,
    ):
        async with httpx.AsyncClient(
            base_url=server.base_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60.0,
            limits=limits,
            trust_env=False,
        ) as client:
            others = []
            for n in range(OTHER_CONVERSATIONS):
                response = await client.post("/conversations", json={"id": f"other-{n}"})
                assert response.status_code == 201, response.text
                others.append(response.json()["id"])
            stuck = (await client.post("/conversations", json={"id": "stuck"})).json()["id"]
            await _others(client, others, 1.0)  # warm-up, not counted

            unloaded, unloaded_statuses = await _others(client, others, seconds)

            locker = await psycopg.AsyncConnection.connect(libpq_url(url))
            try:
                await locker.execute(
                    "SELECT 1 FROM conversations WHERE key = %s FOR UPDATE", (stuck,)
                )
                # In a process of their own: their clients' work is neither
                # the server's nor the measured clients'.
                with ProcessPoolExecutor(
                    1, mp_context=multiprocessing.get_context("spawn")
                ) as pool:
                    writers = asyncio.get_running_loop().run_in_executor(
                        pool, _stuck_writers_process, server.base_url, key, stuck, seconds + 2.0
                    )
                    await asyncio.sleep(1.5)  # the writers are queued before the phase starts
                    loaded, loaded_statuses = await _others(client, others, seconds)
                    stuck_statuses, stuck_answered = await writers
            finally:
                await locker.rollback()
                await locker.close()

    figures.update(
        unloaded_requests=len(unloaded),
        unloaded_p50_ms=percentile(unloaded, 0.5) * 1000,
        unloaded_p99_ms=percentile(unloaded, 0.99) * 1000,
        loaded_requests=len(loaded),
        loaded_p50_ms=percentile(loaded, 0.5) * 1000,
        loaded_p99_ms=percentile(loaded, 0.99) * 1000,
        unloaded_statuses={str(k): v for k, v in sorted(unloaded_statuses.items())},
        loaded_statuses={str(k): v for k, v in sorted(loaded_statuses.items())},
        stuck_statuses={str(k): v for k, v in sorted(stuck_statuses.items())},
        stuck_answer_p50_ms=percentile(stuck_answered, 0.5) * 1000,
        stuck_answer_p99_ms=percentile(stuck_answered, 0.99) * 1000,
    )
    figures["p99_ratio"] = figures["loaded_p99_ms"] / max(figures["unloaded_p99_ms"], 1e-9)
    print_table(
        "fairness: other conversations' requests (ms)",
        ["phase", "requests", "p50", "p99", "answers"],
        [
            ["unloaded", len(unloaded), figures["unloaded_p50_ms"], figures["unloaded_p99_ms"],
             figures["unloaded_statuses"]],
            ["one locked, 60 writers on it", len(loaded), figures["loaded_p50_ms"],
             figures["loaded_p99_ms"], figures["loaded_statuses"]],
        ],
    )  # fmt: skip
    print(
        f"p99 ratio {figures['p99_ratio']:.2f}; the stuck conversation's writers were answered"
        f" {figures['stuck_statuses']} (p50 {figures['stuck_answer_p50_ms']:.1f} ms,"
        f" p99 {figures['stuck_answer_p99_ms']:.1f} ms)"
    )
    return figures


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        comparison(
            "p99 of other conversations' appends and reads, one conversation locked"
            f" with {figures['stuck_writers']} appends on it",
            figures["loaded_p99_ms"],
            figures["unloaded_p99_ms"],
            unit="ms",
            baseline_name="the same requests, nothing locked (same run)",
            goal=("<=", 2.0),
            note=f"answers while locked: {figures['loaded_statuses']}",
        )
    ]


def main() -> None:
    run_and_record("fairness", run, comparisons, notes=__doc__ or "")


if __name__ == "__main__":
    main()
