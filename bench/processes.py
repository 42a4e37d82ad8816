"""Throughput of 32 writers split over 1, 2 and 4 worker processes.

One Python process runs one event loop: past a few writers, an append's
Python work (parsing, deciding, encoding, psycopg) is what limits it, not
PostgreSQL. Several worker processes, each with its own repository and
pool — which is what `uvicorn --workers N` or N containers behind a load
balancer give an HTTP deployment — spread that work over the cores.

Each side runs the same way: `processes` processes, started together,
each with `32 / processes` writers on conversations of their own
(single-message appends through the repository with an expected version),
and the raw baseline likewise (async psycopg `INSERT`+`COMMIT` into a plain
table, `32 / processes` connections per process). Appends per second are
the total count over the slowest process's time. On a 2-core machine the
processes share the cores with PostgreSQL itself. With more than one
process, each keeps one append statement in flight at a time, as the
workers of `convo serve --workers N` do (`api.server.WORKER_WRITE_STATEMENTS`);
one process alone keeps two.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
import uuid
from typing import Any

from api.server import prepare_worker_environment
from bench.harness import (
    bench_database,
    open_repository,
    quick_mode,
    raw_async_connection,
)
from bench.report import Compared, compared, print_comparisons, write_results
from bench.workload import Script, as_json, as_messages
from bench.write_path import Stream, raw_insert, setup_raw_table
from hosting.settings import Settings

WRITERS = 32
PROCESSES = (1, 2, 4)
ROUNDS = 2 if quick_mode() else 3


def _per_writer() -> int:
    return 40 if quick_mode() else 120


async def _store_side(url: str, writers: int, per_writer: int, seed: int) -> tuple[int, float]:
    settings = Settings.from_env()
    async with open_repository(url, settings, pool_size=writers) as repository:
        streams = [await Stream.create(repository) for _ in range(writers)]
        batches = [
            as_messages(Script(seed=seed + k, tools=False).take(per_writer)) for k in range(writers)
        ]

        async def writer(k: int) -> None:
            for message in batches[k]:
                await streams[k].append([message])

        started = time.perf_counter()
        await asyncio.gather(*(writer(k) for k in range(writers)))
        return writers * per_writer, time.perf_counter() - started


async def _raw_side(url: str, writers: int, per_writer: int, seed: int) -> tuple[int, float]:
    settings = Settings.from_env()
    conns = [await raw_async_connection(url, settings) for _ in range(writers)]
    try:
        batches = [
            as_json(Script(seed=seed + k, tools=False).take(per_writer)) for k in range(writers)
        ]
        ids = [uuid.uuid4() for _ in range(writers)]

        async def writer(k: int) -> None:
            for data in batches[k]:
                await raw_insert(conns[k], ids[k], data)

        started = time.perf_counter()
        await asyncio.gather(*(writer(k) for k in range(writers)))
        return writers * per_writer, time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()


def _worker(args: tuple[str, str, int, int, int, int]) -> tuple[int, float]:
    side, url, processes, writers, per_writer, seed = args
    if processes > 1:
        # As `convo serve --workers N` prepares its workers (api/server.py).
        prepare_worker_environment(url)
    run = _store_side if side == "store" else _raw_side
    return asyncio.run(run(url, writers, per_writer, seed))


def _rate(side: str, url: str, processes: int, round_number: int) -> float:
    writers, per_writer = WRITERS // processes, _per_writer()
    jobs = [
        (side, url, processes, writers, per_writer, 1000 * round_number + 100 * p)
        for p in range(processes)
    ]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        done = pool.map(_worker, jobs)
    return sum(count for count, _ in done) / max(seconds for _, seconds in done)


def measure(url: str) -> dict[str, Any]:
    samples: dict[str, dict[int, list[float]]] = {
        "store": {p: [] for p in PROCESSES},
        "raw": {p: [] for p in PROCESSES},
    }
    for round_number in range(ROUNDS):
        for processes in PROCESSES:
            sides = ("store", "raw") if round_number % 2 == 0 else ("raw", "store")
            for side in sides:
                samples[side][processes].append(_rate(side, url, processes, round_number))
    by_processes = {}
    for processes in PROCESSES:
        store = statistics.median(samples["store"][processes])
        raw = statistics.median(samples["raw"][processes])
        by_processes[str(processes)] = {
            "store_appends_per_s": store,
            "raw_appends_per_s": raw,
            "share_of_raw": store / raw,
            "samples": {side: samples[side][processes] for side in samples},
        }
    return {"writers": WRITERS, "per_writer": _per_writer(), "processes": by_processes}


def main() -> None:
    settings = Settings.from_env()
    with bench_database(settings) as url:
        setup_raw_table(url, settings)
        figures = measure(url)
    single_process_store = figures["processes"]["1"]["store_appends_per_s"]
    best = max(figures["processes"].values(), key=lambda e: e["store_appends_per_s"])
    # Appends per second: each process count against raw psycopg's, then the
    # best count against one process.
    throughput: list[Compared] = [
        (
            f"throughput, {WRITERS} writers in {processes} process(es) (share of raw)",
            entry["store_appends_per_s"],
            entry["raw_appends_per_s"],
            f"raw psycopg, {WRITERS} connections in {processes} process(es)",
            (">=", 0.7) if processes != "1" else None,
            "",
        )
        for processes, entry in figures["processes"].items()
    ]
    throughput.append(
        (
            f"throughput, {WRITERS} writers: best process count vs one process",
            best["store_appends_per_s"],
            single_process_store,
            "the store in one process",
            None,
            "",
        )
    )
    rows = compared(throughput, unit="appends/s")
    figures["comparisons"] = rows
    write_results("processes", figures, notes=__doc__ or "")
    print_comparisons("throughput by worker processes", rows)


if __name__ == "__main__":
    main()
