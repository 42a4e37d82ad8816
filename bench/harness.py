"""What every benchmark shares: a fresh migrated database, the store's public
repository on it, raw psycopg connections for the baselines, the quick flag,
timing helpers and facts about the machine and the server."""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import os
import pstats
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import make_url

from bench.report import local_facts, print_comparisons
from hosting import migrate
from hosting.bootstrap import open_storage, repository
from hosting.database import open_database
from hosting.engines import create_database_if_missing, drop_database, make_sync_engine
from hosting.settings import Settings, libpq_url
from store.repository import Repository

QUICK_ENV = "CONVO_BENCH_QUICK"
REPO_ROOT = Path(__file__).resolve().parent.parent


def quick_mode() -> bool:
    """`CONVO_BENCH_QUICK=1`: fewer repeats and appends, same sizes where the goal needs them."""
    return os.environ.get(QUICK_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@contextmanager
def bench_database(settings: Settings) -> Iterator[str]:
    """Yield the SQLAlchemy URL of a new migrated database; drop it at the end."""
    with open_database(settings) as server:
        name = f"convo_bench_{uuid.uuid4().hex[:8]}"
        create_database_if_missing(server.url, name)
        url = make_url(server.url).set(database=name).render_as_string(hide_password=False)
        engine = make_sync_engine(url, settings)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        try:
            yield url
        finally:
            drop_database(server.url, name)


# The pool a caller that makes one call at a time gets from the app: its
# pool opens one connection and grows only when a caller waits, so it never
# grows. (Handed a pool of 30 opened up front, sequential calls went to each
# connection in turn, FIFO: every server backend's caches were cold again by
# its next turn, which slowed appends far more than raw INSERTs rotated
# alike: docs/bench-methods.md.) At most two: one for the calls, one for the feed's NOTIFY;
# opened with min_size=1, it holds a second only once a NOTIFY had to wait.
SEQUENTIAL_POOL = 2


@asynccontextmanager
async def open_repository(
    url: str, settings: Settings, *, pool_size: int = 10, min_size: int | None = None
) -> AsyncIterator[Repository]:
    """The store's public repository on `url`, as the HTTP API builds it (the
    object `POST /conversations/{id}/messages` calls), with room for
    `pool_size` concurrent callers. By default all connections are opened up
    front, so no timed call waits for one; `min_size` opens fewer and lets
    the pool grow when callers wait, as the app's does.
    Everything it opened is closed at exit.

    The only place the benchmarks construct the store.
    """
    storage = await open_storage(
        url,
        settings,
        max_size=pool_size,
        min_size=pool_size if min_size is None else min_size,
    )
    try:
        yield repository(storage, settings)
    finally:
        await storage.close()


async def raw_async_connection(url: str, settings: Settings) -> psycopg.AsyncConnection[Any]:
    """A plain async psycopg connection for a baseline, with the store's session
    options (timeouts), default everything else."""
    return await psycopg.AsyncConnection.connect(
        libpq_url(url), options=settings.connection_options()
    )


def raw_sync_connection(url: str, settings: Settings) -> psycopg.Connection[Any]:
    """A plain (blocking) psycopg connection: admin statements, VACUUM, sizes."""
    return psycopg.connect(libpq_url(url), options=settings.connection_options())


def machine_cpu_seconds() -> float | None:
    """CPU time spent so far by every process on this machine (all cores,
    user + system, from /proc/stat), or None where there is no /proc/stat.
    Over a run that has the machine to itself, the difference is the CPU
    its client and its PostgreSQL server spent together."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


async def time_each(action: Callable[[int], Awaitable[object]], repeats: int) -> list[float]:
    """Seconds taken by each of `repeats` calls of `action(i)`."""
    samples = []
    for i in range(repeats):
        started = time.perf_counter()
        await action(i)
        samples.append(time.perf_counter() - started)
    return samples


async def time_interleaved(
    actions: dict[str, Callable[[int], Awaitable[object]]],
    repeats: int,
    warmup: int,
    *,
    collect: bool = False,
) -> dict[str, list[float]]:
    """Seconds per call of each action, the actions taking turns within every
    repetition (their order rotating), after `warmup` untimed rounds: drift in
    caches, CPU frequency or background work hits every action alike.

    With `collect`, the garbage collector runs (untimed) before every timed
    call, so a call that leaves much cyclic garbage behind does not have it
    collected on the next call's clock; collections its own allocations
    trigger stay on its own. For calls that allocate a lot (thousands of rows)."""
    names = list(actions)
    for i in range(warmup):
        for name in names:
            await actions[name](i)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeats):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            if collect:
                gc.collect()
            started = time.perf_counter()
            await actions[name](warmup + i)
            samples[name].append(time.perf_counter() - started)
    return samples


async def rates_taking_turns(
    actions: dict[str, Callable[[], Awaitable[float]]], rounds: int
) -> dict[str, list[float]]:
    """The rate each action returns, in each of `rounds` rounds after a first
    one that only warms caches; the actions take turns, their order reversed
    every round, so drift hits them alike."""
    rates: dict[str, list[float]] = {name: [] for name in actions}
    turns = list(actions.items())
    for i in range(rounds + 1):
        for name, action in turns[:: 1 if i % 2 else -1]:
            rate = await action()
            if i:
                rates[name].append(rate)
    return rates


def median_rates(rates: dict[str, list[float]], unit: str) -> dict[str, Any]:
    """Each side's median rate, as `<side>_<unit>`, and every sample."""
    return {
        **{f"{side}_{unit}": statistics.median(samples) for side, samples in rates.items()},
        "samples": rates,
    }


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def vacuum(url: str, settings: Settings) -> None:
    """`VACUUM (ANALYZE)` the whole database: statistics current, visibility
    maps set, and no autovacuum triggered by a load running during a measurement."""
    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE)")


async def profile_calls(
    action: Callable[[int], Awaitable[object]], calls: int, top: int = 20
) -> tuple[str, str]:
    """cProfile of `calls` awaits of `action(i)`: the top `top` functions by
    cumulative time, and by own time, as text. The event loop runs in this
    thread, so time spent waiting for the server shows up in the selector's
    `select`/`poll`; a coroutine counts one call per resumption."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        for i in range(calls):
            await action(i)
    finally:
        profiler.disable()
    return (
        _stats_text(profiler, pstats.SortKey.CUMULATIVE, calls, top),
        _stats_text(profiler, pstats.SortKey.TIME, calls, top),
    )


def _stats_text(profiler: cProfile.Profile, key: pstats.SortKey, calls: int, top: int) -> str:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(top)
    text = out.getvalue()
    # Paths relative to site-packages, the standard library and the repository.
    for prefix in sorted({p for p in sys.path if p}, key=len, reverse=True):
        text = text.replace(prefix.rstrip("/") + "/", "")
    text = text.replace(str(REPO_ROOT) + "/", "")
    lines = [line.rstrip() for line in text.splitlines()]
    start = next((i for i, line in enumerate(lines) if re.search(r"function calls", line)), 0)
    return f"({calls} calls)\n" + "\n".join(
        line.strip() if i == 0 else line for i, line in enumerate(lines[start:]) if line
    )


def server_facts(url: str, settings: Settings) -> dict[str, Any]:
    """The server's version and the settings commit and cache costs depend on."""
    shown: dict[str, str] = {}
    with raw_sync_connection(url, settings) as conn:
        for name in ("server_version", *SERVER_SETTINGS):
            row = conn.execute(f"SHOW {name}").fetchone()
            shown[name] = str(row[0]) if row else "?"
    return {"postgresql": shown.pop("server_version"), "server_settings": shown}


SERVER_SETTINGS = ("fsync", "synchronous_commit", "shared_buffers", "max_connections", "jit")


def machine_facts(
    url: str, settings: Settings, load_before: tuple[float, float, float]
) -> dict[str, Any]:
    """What the figures depend on, for a results file's `machine`: with the
    1-minute load average when the run started (`load_before`, from
    `os.getloadavg()`) and ended. Other work on the machine (it has few cores
    and shares them with the server) moves absolute figures; interleaving
    keeps the ratios fairer than the absolute numbers."""
    return {
        **local_facts(),
        **server_facts(url, settings),
        "load_average_1min": {"start": load_before[0], "end": os.getloadavg()[0]},
        "code": code_revision(),
    }


def code_revision() -> str | None:
    """The commit the store's code was at, `+ uncommitted changes` if tracked
    files other than the benchmarks' own differ from it (None outside a git
    checkout)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git(
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)bench",
            ":(exclude)docs/benchmarks.md",
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{commit} + uncommitted changes" if dirty else commit


def run_and_record(
    name: str,
    run: Callable[[str, Settings], Coroutine[Any, Any, dict[str, Any]]],
    comparisons: Callable[[dict[str, Any]], list[dict[str, Any]]],
    *,
    notes: str,
) -> dict[str, Any]:
    """A benchmark's common frame: a scratch database, `run` on it, the
    machine's facts, the goals (`comparisons`), the results file."""
    from bench.report import write_results

    settings = Settings.from_env()
    load_before = os.getloadavg()
    with bench_database(settings) as url:
        figures = asyncio.run(run(url, settings))
        machine = machine_facts(url, settings, load_before)
    figures["comparisons"] = comparisons(figures)
    write_results(name, figures, notes=notes, machine=machine)
    return figures


def run_and_show(
    name: str,
    run: Callable[[str, Settings], Coroutine[Any, Any, dict[str, Any]]],
    comparisons: Callable[[dict[str, Any]], list[dict[str, Any]]],
    *,
    title: str,
    notes: str,
) -> dict[str, Any]:
    """`run_and_record`, then its comparisons as a table headed `title` and
    whether the run was quick or full."""
    figures = run_and_record(name, run, comparisons, notes=notes)
    mode = "quick" if quick_mode() else "full"
    print_comparisons(f"{title} ({mode} run)", figures["comparisons"])
    return figures
