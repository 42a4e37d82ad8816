"""The run: every system on its own scratch database, the same generated
conversation, the scenarios in one process and one event loop (see the
package's docstring for what is measured and why it is fair)."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import make_url

from bench.harness import bench_database, machine_facts, profile_calls, quick_mode, vacuum
from bench.peers.systems import SYSTEMS, TAG, Conflict, ConvoStore, System, tagged
from bench.report import comparison, print_comparisons, write_results
from bench.workload import Script
from hosting.engines import create_database_if_missing, drop_database
from hosting.settings import Settings, libpq_url

QUICK = quick_mode()
# History sizes: last 50 at each; single appends up to MEDIUM (storage, cold load).
SMALL, MEDIUM, LARGE = (250, 1_000, 2_000) if QUICK else (1_000, 5_000, 20_000)
LAST_BUDGET_S = 1.0 if QUICK else 2.0  # per system and size: repeats = budget / one call
LAST_REPEATS = (3, 40) if QUICK else (5, 150)  # at least, at most
COLD_REPEATS = 3 if QUICK else 9
WRITERS = 8
PER_WRITER = 50 if QUICK else 250
RETRY_PER_WRITER = 15 if QUICK else 50  # a retry mode makes up to 8 attempts per append
GROWING_PER_WRITER = 15 if QUICK else 50  # a system whose append cost grows with history
MAX_ATTEMPTS = 200
BACKOFF_S = 0.001  # a retry waits a random 0..attempt x 1 ms (at most 10 ms)
CONCURRENCY_TIMEOUT_S = 120 if QUICK else 240
OURS = "convo-store"
OURS_READ = f"{OURS} read_messages"  # its cold read without the payload build (information)
LANGCHAIN = "langchain-postgres"  # the bare-table store the single append is held against
PROFILE_CALLS = 3 if QUICK else 5
SEED = 11

SIZES_SQL = """
SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm') AND n.nspname = 'public'
"""


def reason(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}"[:400] if text else type(error).__name__


def median_ms(samples: list[float]) -> float | None:
    return statistics.median(samples) * 1000 if samples else None


@contextmanager
def scratch_databases(settings: Settings, names: list[str]) -> Iterator[dict[str, str]]:
    """A fresh database per system on one server: the store's from
    `bench.harness.bench_database` (migrated), each peer's an empty database
    created beside it (its tables are the peer's own, created by the peer),
    all dropped at the end."""
    with bench_database(settings) as url:
        base = make_url(url)
        created: dict[str, str] = {}
        try:
            for name in names:
                if name == OURS:
                    continue
                database = f"{base.database}_{name.replace('-', '_')}"
                create_database_if_missing(url, database)
                created[name] = base.set(database=database).render_as_string(hide_password=False)
            yield {OURS: url, **created}
        finally:
            for name in created:
                drop_database(url, f"{base.database}_{name.replace('-', '_')}")


def table_sizes(url: str) -> dict[str, dict[str, int]]:
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute(SIZES_SQL).fetchall()
    return {
        name: {"table_and_toast": table, "indexes": indexes, "total": total}
        for name, table, indexes, total in rows
    }


def growth(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, Any]:
    tables = {
        name: {part: sizes[part] - before.get(name, {}).get(part, 0) for part in sizes}
        for name, sizes in after.items()
    }
    return {name: g for name, g in tables.items() if g["total"]}


def versions(system: System) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for package in system.packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def install_report() -> dict[str, Any]:
    """What bench/peers/install.py recorded in this virtualenv, if it ran."""
    path = Path(sys.prefix) / "peers-install.json"
    if not path.exists():
        return {}
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


class Run:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.systems: dict[str, System] = {}
        self.urls: dict[str, str] = {}
        self.threads: dict[str, Any] = {}
        #: name -> why the system stopped (could not start, or its load failed).
        self.stopped: dict[str, str] = {}
        #: scenario -> name -> why that one measurement failed.
        self.errors: dict[str, dict[str, str]] = {}
        self.samples: dict[str, list[float]] = {}
        #: Seconds each step of the run took, in order.
        self.steps: dict[str, float] = {}
        self._step: tuple[str, float] | None = None

    def step(self, label: str | None) -> None:
        """Start step `label` (None: end the last one), timing the one before."""
        now = time.perf_counter()
        if self._step is not None:
            self.steps[self._step[0]] = round(now - self._step[1], 1)
        self._step = None if label is None else (label, now)
        if label is not None:
            print(f"{label} ...", flush=True)

    # --- bookkeeping -------------------------------------------------------------------

    def alive(self) -> list[System]:
        return [s for name, s in self.systems.items() if name not in self.stopped]

    def stop(self, system: System, what: str, error: BaseException) -> None:
        self.stopped[system.name] = f"{what} failed: {reason(error)}"
        print(f"  {system.name}: {self.stopped[system.name]}", flush=True)

    def error(self, scenario: str, system: System, error: BaseException) -> None:
        self.errors.setdefault(scenario, {})[system.name] = reason(error)
        print(f"  {system.name}: {scenario} failed: {reason(error)}", flush=True)

    def single_cap(self, system: System) -> int:
        return SMALL if system.grows_with_history else MEDIUM

    # --- the phases ---------------------------------------------------------------------

    async def open(self, urls: dict[str, str]) -> None:
        installed = install_report()
        for cls in SYSTEMS:
            system = cls(self.settings)
            self.systems[system.name] = system
            self.urls[system.name] = urls[system.name]
            try:
                await system.open(urls[system.name])
                self.threads[system.name] = await system.new_thread()
            except Exception as error:
                why = reason(error)
                pip = installed.get(system.name, {})
                if isinstance(error, ImportError) and pip.get("error"):
                    why = f"not installed: {pip['error']}"
                elif isinstance(error, ImportError):
                    why = f"not installed here ({why}); `make bench-peers` installs it"
                self.stopped[system.name] = f"could not start: {why}"
                print(f"  {system.name}: {self.stopped[system.name]}", flush=True)

    async def close(self) -> None:
        for system in self.systems.values():
            try:
                await system.close()
            except Exception as error:
                print(f"  {system.name}: close failed: {reason(error)}", flush=True)

    def natives(
        self, raw: list[dict[str, Any]], start: int, systems: list[System]
    ) -> dict[str, list[Any]]:
        """Each system's shape of `raw` (messages `start`...), built before any clock."""
        out: dict[str, list[Any]] = {}
        for system in systems:
            try:
                out[system.name] = [system.native(r, start + i) for i, r in enumerate(raw)]
            except Exception as error:
                self.stop(system, "building its messages", error)
        gc.collect()
        gc.freeze()  # not collected again and again during the measurements
        return out

    async def grow(self, natives: dict[str, list[Any]], start: int, stop: int) -> None:
        """Single appends `start`..`stop`-1 (`natives` from message 0 on),
        the systems taking turns in a rotating order, every call timed."""
        for i in range(start, stop):
            live = [s for s in self.alive() if i < self.single_cap(s)]
            if not live:
                return
            shift = i % len(live)
            for system in live[shift:] + live[:shift]:
                item = natives[system.name][i]
                started = time.perf_counter()
                try:
                    await system.append(self.threads[system.name], item)
                except Exception as error:
                    self.stop(system, f"single append #{i + 1}", error)
                    continue
                self.samples.setdefault(system.name, []).append(time.perf_counter() - started)

    async def extend(self, natives: dict[str, list[Any]], start: int, stop: int) -> None:
        """Single appends `start`..`stop`-1, untimed (for the storage figure),
        each system in its own task: they wait for their own servers' commits
        at the same time."""

        async def one(system: System) -> None:
            for i in range(start, min(stop, self.single_cap(system))):
                try:
                    await system.append(self.threads[system.name], natives[system.name][i])
                except Exception as error:
                    self.stop(system, f"single append #{i + 1}", error)
                    return

        await asyncio.gather(*(one(s) for s in self.alive()))

    async def bulk(self, systems: list[System], raw: list[dict[str, Any]], start: int) -> None:
        """Untimed loading with each system's batch call."""
        natives = self.natives(raw, start, systems)
        for system in systems:
            if system.name in self.stopped:
                continue
            try:
                await system.load(self.threads[system.name], natives[system.name])
            except Exception as error:
                self.stop(system, f"loading {len(raw):,} messages", error)
        del natives
        gc.unfreeze()
        gc.collect()

    def vacuum_all(self) -> None:
        for system in self.alive():
            vacuum(self.urls[system.name], self.settings)

    def sizes(self) -> dict[str, dict[str, dict[str, int]]]:
        return {s.name: table_sizes(self.urls[s.name]) for s in self.alive()}

    async def interleave(
        self, scenario: str, actions: dict[str, Callable[[], Awaitable[int]]]
    ) -> dict[str, Any]:
        """Each action's median: untimed first call (its duration sets how
        many repeats fit the budget), then rounds in a rotating order, the
        garbage collector run (untimed) before every timed call."""
        returned: dict[str, int] = {}
        targets: dict[str, int] = {}
        low, high = LAST_REPEATS
        gc.collect()
        gc.freeze()  # what is alive now is not traversed by each collection below
        for name, action in actions.items():
            started = time.perf_counter()
            try:
                returned[name] = await action()
            except Exception as error:
                self.error(scenario, self.systems[name], error)
                continue
            took = max(time.perf_counter() - started, 1e-6)
            targets[name] = max(low, min(high, int(LAST_BUDGET_S / took)))
        samples: dict[str, list[float]] = {name: [] for name in targets}
        for round_number in range(max(targets.values(), default=0)):
            names = [n for n in targets if len(samples[n]) < targets[n]]
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                gc.collect()
                started = time.perf_counter()
                await actions[name]()
                samples[name].append(time.perf_counter() - started)
        gc.unfreeze()
        return {
            name: {
                "median_ms": median_ms(samples[name]),
                "repeats": len(samples[name]),
                "items_returned": returned[name],
            }
            for name in targets
        }

    async def last_50(self, size: int) -> dict[str, Any]:
        self.step(f"last 50 at {size:,}")

        def action(system: System) -> Callable[[], Awaitable[int]]:
            thread = self.threads[system.name]
            return lambda: system.last_50(thread)

        return await self.interleave(
            f"last_50_at_{size}", {s.name: action(s) for s in self.alive()}
        )

    async def cold_load(self) -> dict[str, Any]:
        self.step(f"cold load of {MEDIUM:,} messages")
        loads: dict[str, Callable[[], Awaitable[tuple[float, int] | None]]] = {}
        for system in self.alive():
            thread = self.threads[system.name]
            loads[system.name] = functools.partial(system.cold_load, thread)
            if system.name == OURS:
                loads[OURS_READ] = functools.partial(system.cold_read, thread)
        returned: dict[str, int] = {}
        for name, load in list(loads.items()):  # warm-up: imports, first compilations
            try:
                found = await load()
            except Exception as error:
                self.error("cold_load", self.systems[name.split()[0]], error)
                found = None
            if found is None:
                del loads[name]
            else:
                returned[name] = found[1]
        names = list(loads)
        samples: dict[str, list[float]] = {name: [] for name in names}
        gc.collect()
        gc.freeze()
        for round_number in range(COLD_REPEATS):
            shift = round_number % max(len(names), 1)
            for name in names[shift:] + names[:shift]:
                gc.collect()
                found = await loads[name]()
                assert found is not None
                samples[name].append(found[0])
        gc.unfreeze()
        return {
            name: {
                "median_ms": median_ms(s),
                "repeats": len(s),
                "items_returned": returned[name],
            }
            for name, s in samples.items()
        }

    async def concurrency(self, system: System, mode: str, per_writer: int) -> dict[str, Any]:
        """`WRITERS` tasks appending `per_writer` tagged messages each to one
        new conversation; then what the system hands back, checked."""
        retry = system.modes[mode]
        thread = await system.new_thread()
        items = [
            [
                system.native(tagged(raw, k, i), i)
                for i, raw in enumerate(Script(seed=300 + k, prefix=f"w{k}").take(per_writer))
            ]
            for k in range(WRITERS)
        ]
        writers = [await system.writer(thread, mode) for _ in range(WRITERS)]
        acknowledged: set[tuple[int, int]] = set()
        errors: Counter[str] = Counter()
        retries = 0
        given_up = 0

        async def write(k: int) -> None:
            nonlocal retries, given_up
            pause = random.Random(k)
            for i, item in enumerate(items[k]):
                for _attempt in range(MAX_ATTEMPTS):
                    try:
                        await writers[k].append(item)
                    except Conflict:
                        errors["conflict"] += 1
                        if not retry:
                            given_up += 1
                            break
                        retries += 1
                        # As a client should: a short random pause, growing with the attempts.
                        await asyncio.sleep(pause.uniform(0, BACKOFF_S * min(_attempt + 1, 10)))
                        await writers[k].refresh()
                        continue
                    except Exception as error:
                        errors[type(error).__name__] += 1
                        given_up += 1
                        break
                    acknowledged.add((k, i))
                    break
                else:
                    given_up += 1

        started = time.perf_counter()
        timed_out = False
        try:
            await asyncio.wait_for(
                asyncio.gather(*(write(k) for k in range(WRITERS))), CONCURRENCY_TIMEOUT_S
            )
        except TimeoutError:
            timed_out = True
        seconds = time.perf_counter() - started
        for writer in writers:
            await writer.close()
        stored = []
        for text in await system.texts(thread):
            match = TAG.match(text)
            if match:
                stored.append((int(match[1]), int(match[2])))
        distinct = set(stored)
        broken = 0
        for k in range(WRITERS):
            seen: list[int] = []
            for w, i in stored:
                if w == k and i not in seen:
                    seen.append(i)
            broken += seen != sorted(seen)
        submitted = WRITERS * per_writer
        return {
            "writers": WRITERS,
            "per_writer": per_writer,
            "retry_on_conflict": retry,
            "submitted": submitted,
            "acknowledged": len(acknowledged),
            "stored": len(stored),
            "stored_distinct": len(distinct),
            "duplicates": len(stored) - len(distinct),
            "lost_silently": len(acknowledged - distinct),
            "stored_unacknowledged": len(distinct - acknowledged),
            "not_stored": submitted - len(distinct),
            "writers_order_broken": broken,
            "errors": dict(errors),
            "errors_total": sum(errors.values()),
            "retries": retries,
            "given_up": given_up,
            "seconds": seconds,
            "acknowledged_per_s": len(acknowledged) / seconds if seconds else None,
            "timed_out": timed_out,
            "defects": submitted - len(distinct) + (len(stored) - len(distinct)) + broken,
        }

    # --- everything ------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        raw = Script(seed=SEED, tools=True, prefix="c").take(LARGE)
        natives = self.natives(raw[:MEDIUM], 0, self.alive())
        self.vacuum_all()
        sizes_before = self.sizes()

        self.step(f"single appends to {SMALL:,}")
        await self.grow(natives, 0, SMALL)
        self.vacuum_all()
        storage = {str(SMALL): self.storage(sizes_before, SMALL)}
        last = {str(SMALL): await self.last_50(SMALL)}

        self.step(f"single appends to {MEDIUM:,} (untimed, the systems concurrently)")
        await self.extend(natives, SMALL, MEDIUM)
        del natives
        gc.unfreeze()
        growing = [s for s in self.alive() if self.single_cap(s) < MEDIUM]
        await self.bulk(growing, raw[SMALL:MEDIUM], SMALL)
        self.vacuum_all()
        storage[str(MEDIUM)] = self.storage(sizes_before, MEDIUM, skip={s.name for s in growing})
        last[str(MEDIUM)] = await self.last_50(MEDIUM)
        cold = await self.cold_load()
        profile = await self.profile()

        self.step(f"loading to {LARGE:,}")
        await self.bulk(self.alive(), raw[MEDIUM:LARGE], MEDIUM)
        self.vacuum_all()
        last[str(LARGE)] = await self.last_50(LARGE)

        concurrent: dict[str, dict[str, Any]] = {}
        for system in self.alive():
            for mode, retry in system.modes.items():
                per_writer = (
                    GROWING_PER_WRITER
                    if system.grows_with_history
                    else RETRY_PER_WRITER
                    if retry
                    else PER_WRITER
                )
                self.step(f"{WRITERS} writers: {system.name}, {mode}")
                try:
                    result = await self.concurrency(system, mode, per_writer)
                except Exception as error:
                    self.error(f"concurrency {mode}", system, error)
                    continue
                concurrent.setdefault(system.name, {})[mode] = result
        self.step(None)
        return {
            "append": self.append_figures(),
            "last_50": last,
            "cold_load": cold,
            "storage": storage,
            "concurrency": concurrent,
            "profile": profile,
        }

    async def profile(self) -> dict[str, str]:
        """cProfile of the store's calls where the peers are usually ahead:
        single appends (to a new conversation) and the cold payload build."""
        store = self.systems[OURS]
        if OURS in self.stopped or not isinstance(store, ConvoStore):
            return {}
        self.step("profile of the store")
        thread = self.threads[OURS]
        fresh = await store.new_thread()
        messages = [store.native(raw, i) for i, raw in enumerate(Script(seed=SEED + 1).take(100))]

        async def append(i: int) -> None:
            await store.append(fresh, messages[i])

        async def build(_: int) -> None:
            await store.cold_load(thread)

        appends, _ = await profile_calls(append, len(messages), top=15)
        builds, _ = await profile_calls(build, PROFILE_CALLS, top=15)
        return {
            "single_append_cumulative": appends,
            f"cold_assemble_{MEDIUM}_cumulative": builds,
        }

    def storage(
        self,
        before: dict[str, dict[str, dict[str, int]]],
        appends: int,
        skip: set[str] | None = None,
    ) -> dict[str, Any]:
        after = self.sizes()
        out: dict[str, Any] = {}
        for name, sizes in after.items():
            if skip and name in skip:
                continue
            by_table = growth(before.get(name, {}), sizes)
            total = sum(g["total"] for g in by_table.values())
            out[name] = {
                "appends": appends,
                "bytes_per_message": total / appends,
                "by_table_bytes_per_message": {
                    table: round(g["total"] / appends, 1)
                    for table, g in sorted(by_table.items(), key=lambda t: -t[1]["total"])
                },
            }
        return out

    def append_figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, samples in self.samples.items():
            out[name] = {
                "appends": len(samples),
                "median_ms": median_ms(samples),
                "p90_ms": statistics.quantiles(samples, n=10)[-1] * 1000
                if len(samples) > 10
                else None,
                "median_ms_first_100": median_ms(samples[:100]),
                "median_ms_last_100": median_ms(samples[-100:]),
            }
        return out


# --- the table --------------------------------------------------------------------------------

WHY_BEHIND = {
    "append": "Our append is one transaction under the conversation's row lock that checks "
    "tool-call pairing, writes the event, the message row and its index rows, and moves the "
    "conversation's head, then returns the stored message numbered (profile: "
    "`profile.single_append_cumulative`).",
    "last_50": "Our read returns 50 StoredMessage objects (validated models with seq, batch, "
    "role ordinal).",
    "cold_load": "Ours includes building the provider payload (reading the window, "
    "tool-pairing checks and repairs, conversion to OpenAI Chat JSON; profile: "
    "`profile.cold_assemble_*`); the peer's figure stops at its own objects.",
    "storage": "Ours keeps the append's event (with the text) plus projections (message row, "
    "per-role index, batch membership, tool calls), each with its own indexes; the peers "
    "keep one JSON row per message (LangGraph: the whole list per checkpoint).",
    "concurrency": "Level: the same count of defects (the counts, and the errors raised, "
    "are in the cells and in `concurrency`).",
    "throughput": "Every append of ours takes the conversation's row lock, so 8 writers on "
    "ONE conversation write one after another; a peer that takes no lock (or a shorter one) "
    "interleaves its INSERTs.",
}


def cell(ours: float | None, value: float | None, lower_is_better: bool) -> str | None:
    """'ahead', 'behind' or 'tie': ours against this peer's figure."""
    if ours is None or value is None:
        return None
    if ours == value:
        return "tie"
    return "ahead" if (ours < value) == lower_is_better else "behind"


def table(figures: dict[str, Any], systems: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of scenario x system for docs/benchmarks.md: each peer's figure,
    and whether the store is ahead of it."""
    names = [cls.name for cls in SYSTEMS]
    rows: list[dict[str, Any]] = []

    def row(
        key: str,
        label: str,
        unit: str,
        values: dict[str, float | None],
        *,
        lower_is_better: bool = True,
        texts: dict[str, str] | None = None,
        notes: dict[str, str] | None = None,
        why: str | None = None,
    ) -> None:
        ours = values.get(OURS)
        cells = {}
        for name in names:
            value = values.get(name)
            status = systems[name]["status"]
            note = (notes or {}).get(name, "")
            if value is None and status != "ok":
                note = note or status
            cells[name] = {
                "value": value,
                "text": (texts or {}).get(name),
                "verdict": None if name == OURS else cell(ours, value, lower_is_better),
                "note": note,
            }
        rows.append(
            {
                "key": key,
                "scenario": label,
                "unit": unit,
                "lower_is_better": lower_is_better,
                "cells": cells,
                "why_behind": why if why is not None else WHY_BEHIND.get(key, ""),
            }
        )

    append = figures["append"]
    row(
        "append",
        f"append, 1 message per call: median of appends 1–{SMALL:,}",
        "ms",
        {n: a["median_ms"] for n, a in append.items()},
    )
    row(
        "append",
        f"append, 1 message per call: median of appends {SMALL - 99:,}–{SMALL:,}",
        "ms",
        {n: a["median_ms_last_100"] for n, a in append.items()},
        notes={
            n: "each append re-stores the whole message list: its cost grows with history"
            for n in names
            if systems[n].get("grows_with_history")
        },
    )
    whole = {n: "the whole conversation: no limit" for n in names if not systems[n]["has_last_n"]}
    for size, measured in figures["last_50"].items():
        row(
            "last_50",
            f"last 50 messages at {int(size):,} history (median)",
            "ms",
            {n: m["median_ms"] for n, m in measured.items()},
            notes=whole,
        )
    cold = {n: m["median_ms"] for n, m in figures["cold_load"].items()}
    split = ""
    if cold.get(OURS) and cold.get(OURS_READ):
        split = (
            f" For scale: reading every message as StoredMessage models (read_messages, "
            f"the next row), with no payload build, takes {cold[OURS_READ]:,.0f} ms here."
        )
    row(
        "cold_load",
        f"cold load of {MEDIUM:,} messages, fresh client (ours: the payload build, "
        "provider conversion included)",
        "ms",
        cold,
        why=WHY_BEHIND["cold_load"] + split,
    )
    if OURS_READ in cold:
        row(
            "cold_load",
            f"cold load of {MEDIUM:,} messages, fresh client (ours: read_messages, all "
            "messages, no payload build; for information)",
            "ms",
            {**cold, OURS: cold[OURS_READ]},
            why="Ours: every message by read_messages pages of 1,000, validated into "
            "StoredMessage models (seq, batch, role ordinal, tool calls, timestamps).",
        )
    for size, measured in figures["storage"].items():
        ours = measured.get(OURS, {}).get("by_table_bytes_per_message", {})
        shown = ", ".join(f"{t} {b:,.0f}" for t, b in ours.items())
        row(
            "storage",
            f"storage after {int(size):,} single appends",
            "bytes/message",
            {n: m["bytes_per_message"] for n, m in measured.items()},
            notes={
                n: f"not measured at {int(size):,}: stopped at {SMALL:,} single appends"
                for n in names
                if n not in measured and systems[n]["status"] == "ok"
            },
            why=WHY_BEHIND["storage"]
            + (f" Ours by table, bytes/message: {shown}." if ours else ""),
        )
    concurrent = figures["concurrency"]
    for retry in (False, True):
        values: dict[str, float | None] = {}
        texts: dict[str, str] = {}
        rates: dict[str, float | None] = {}
        notes: dict[str, str] = {}
        for name in names:
            modes = concurrent.get(name, {})
            found = [(m, r) for m, r in modes.items() if r["retry_on_conflict"] == retry]
            if not found:
                if name in concurrent and retry:
                    notes[name] = "no version check to retry on"
                continue
            mode, result = found[0]
            values[name] = result["defects"]
            rates[name] = result["acknowledged_per_s"]
            order = (
                "order kept"
                if not result["writers_order_broken"]
                else (f"order broken for {result['writers_order_broken']} writers")
            )
            texts[name] = (
                f"{result['stored_distinct']:,}/{result['submitted']:,} stored, "
                f"{result['lost_silently']} lost silently, {result['duplicates']} dup., {order}, "
                f"{result['errors_total']:,} errors"
                + (f" ({result['retries']:,} retried)" if retry else "")
                + (
                    f", {result['given_up']:,} given up after {MAX_ATTEMPTS} attempts"
                    if retry and result["given_up"]
                    else ""
                )
                + (", TIMED OUT" if result["timed_out"] else "")
                + f" [{mode}; {result['per_writer']} per writer]"
            )
        label = "with version check + retry" if retry else "no retry"
        row(
            "concurrency",
            f"8 writers on one conversation, {label}: defects (not stored + duplicates + "
            "writers whose order broke)",
            "",
            values,
            texts=texts,
            notes=notes,
        )
        if not retry:
            row(
                "throughput",
                "8 writers on one conversation, no retry: acknowledged appends per second",
                "appends/s",
                rates,
                lower_is_better=False,
            )
    return rows


def goals(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals on the peers' figures, for the page's goal count."""
    rows = []
    cold = figures["cold_load"]
    names = [cls.name for cls in SYSTEMS if cls.name != OURS]
    peers = {n: m["median_ms"] for n, m in cold.items() if n in names and m["median_ms"]}
    if OURS in cold and peers:
        fastest = min(peers, key=lambda n: peers[n])
        rows.append(
            comparison(
                f"cold {MEDIUM:,}-message payload build vs the fastest peer's cold load",
                cold[OURS]["median_ms"],
                peers[fastest],
                unit="ms",
                baseline_name=fastest,
                goal=("<=", 1.0),
            )
        )
    appends = figures["append"]
    langchain = appends.get(LANGCHAIN, {}).get("median_ms")
    if appends.get(OURS, {}).get("median_ms") and langchain:
        rows.append(
            comparison(
                f"single append (median, to {SMALL:,} messages) vs langchain-postgres's",
                appends[OURS]["median_ms"],
                langchain,
                unit="ms",
                baseline_name=LANGCHAIN,
                goal=("<=", 1.0),
            )
        )
    for mode, result in figures["concurrency"].get(OURS, {}).items():
        # No message lost: every acknowledged append is stored, once, in its writer's order
        # (a message refused loudly is the writer's to retry, not a lost one).
        kept = result["acknowledged"] - result["lost_silently"] - result["duplicates"]
        rows.append(
            comparison(
                f"8 writers × {result['per_writer']} on one conversation ({mode}): "
                "acknowledged appends stored",
                kept,
                result["acknowledged"],
                unit="messages",
                baseline_name="acknowledged",
                goal=(">=", 1.0),
                note=f"{result['submitted']:,} submitted, {result['lost_silently']} lost "
                f"silently, {result['duplicates']} duplicated, {result['given_up']} refused "
                f"to the end, {result['writers_order_broken']} writers' order broken",
            )
        )
    return rows


def figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def behind_notes(rows: list[dict[str, Any]], calls: dict[str, dict[str, str]]) -> list[str]:
    """Per scenario where the store is not ahead of every peer: of whom, by
    how much, why (what our call does), and what each such peer's call does."""
    notes = []
    for row in rows:
        ours = row["cells"][OURS]
        found = [(name, c) for name, c in row["cells"].items() if c["verdict"] in ("behind", "tie")]
        if not found:
            continue
        parts = []
        for name, c in found:
            word = "behind" if c["verdict"] == "behind" else "level with"
            if c["text"] is None:
                shown = f"{figure(c['value'])} vs ours {figure(ours['value'])} {row['unit']}"
                parts.append(f"{word} {name} ({shown})")
            else:
                parts.append(f"{word} {name}")
        peer_calls = " ".join(
            f"{name}: {calls[name][row['key']]}"
            for name, _ in found
            if row["key"] in ("append", "last_50", "cold_load")
            and row["key"] in calls.get(name, {})
        )
        said = f"{row['scenario']}: we are {'; '.join(parts)}."
        notes.append(f"{said} {row['why_behind']} {peer_calls}".strip())
    return notes


def main() -> None:
    settings = Settings.from_env()
    load_before = os.getloadavg()
    started = time.perf_counter()
    names = [cls.name for cls in SYSTEMS]
    with scratch_databases(settings, names) as urls:
        run = Run(settings)

        async def everything() -> dict[str, Any]:
            await run.open(urls)
            try:
                return await run.run()
            finally:
                await run.close()

        figures = asyncio.run(everything())
        machine = machine_facts(urls[OURS], settings, load_before)
    systems: dict[str, dict[str, Any]] = {
        name: {
            "status": run.stopped.get(name, "ok"),
            "versions": versions(s),
            "driver": s.driver,
            "calls": s.calls,
            "has_last_n": s.has_last_n,
            "grows_with_history": s.grows_with_history,
            "concurrency_modes": list(s.modes),
        }
        for name, s in run.systems.items()
    }
    figures.update(
        {
            "quick": QUICK,
            "run_id": uuid.uuid4().hex[:8],
            "seconds": time.perf_counter() - started,
            "sizes": {"small": SMALL, "medium": MEDIUM, "large": LARGE},
            "systems": systems,
            "errors": run.errors,
            "step_seconds": run.steps,
        }
    )
    rows = table(figures, systems)
    figures["order"] = names
    figures["table"] = rows
    figures["not_ahead"] = behind_notes(rows, {n: s["calls"] for n, s in systems.items()})
    figures["comparisons"] = goals(figures)
    from bench.peers import __doc__ as notes

    write_results("peers", figures, notes=notes or "", machine=machine)
    print_comparisons(
        f"the store vs peers ({'quick' if QUICK else 'full'} run)", figures["comparisons"]
    )
    marks = {"ahead": " ✅", "behind": " ❌", "tie": " ＝", None: ""}
    for r in rows:
        print(f"- {r['scenario']}")
        for name, c in r["cells"].items():
            shown = c["text"] or ("n/a" if c["value"] is None else f"{c['value']:,.3g}")
            print(
                f"    {name}: {shown} {r['unit'] if c['text'] is None else ''}{marks[c['verdict']]}"
            )
    for name, why in run.stopped.items():
        print(f"{name}: {why}")
    print(f"peers: {figures['seconds']:.0f} s")
