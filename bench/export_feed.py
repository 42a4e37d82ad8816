"""Export and the event feed, against raw psycopg reading the same rows in
the same run.

- export: one conversation of 100,000 messages (20,000 with
  `CONVO_BENCH_QUICK=1`; user and assistant turns, a tool call and its
  result every 5th turn, ~400 characters each), written through the
  repository. The store exports it as `GET /conversations/{id}/export`
  does (`store.repository.export.export_pages`: keyset pages of 1,000, typed JSON
  lines) to /dev/null; the baseline reads the same message bodies in keyset
  pages of 1,000 with plain psycopg (`messages` joined to `events`) and
  writes one orjson line each. Each runs in a child process of its own,
  which reports its messages/s, its resident set before the export (after
  imports and connecting: VmRSS, its peak reset to it there) and its peak
  after it (VmHWM): the growth is the export's own. They take turns,
  medians.
- feed: the tenant feed read from its start to its end in pages of 1,000
  (`Repository.read_events`: the tenant filter joined in SQL, events
  decoded and named), against the global feed's statement without a tenant
  (`store.postgres.feed.READ_FEED`) on a plain psycopg connection; both in
  this process, interleaved, medians of events/s.
- notify cost (why the tail polls, store.domain.feed): 8 writers each on its own
  connection, INSERT + COMMIT into a plain table, against the same with
  `pg_notify` in the same statement (a data-modifying CTE: no extra round
  trip). PostgreSQL serialises the commits of notifying transactions; the
  ratio is what that costs appends.

No figure is asserted; goals are compared in `comparisons`.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any

import orjson
import psycopg

from bench.harness import (
    median_rates,
    open_repository,
    quick_mode,
    rates_taking_turns,
    raw_async_connection,
    raw_sync_connection,
    run_and_show,
    vacuum,
)
from bench.report import comparison
from bench.workload import Script, as_messages
from hosting.settings import Settings
from store.domain.feed_vector import FeedVector, parse_position
from store.postgres.feed import READ_FEED
from store.repository import Repository

QUICK = quick_mode()
MESSAGES = 20_000 if QUICK else 100_000
APPEND_SIZE = 1000
EXPORT_REPEATS = 1 if QUICK else 3
FEED_REPEATS = 3 if QUICK else 5
PAGE = 1000
NOTIFY_WRITERS = 8
NOTIFY_PER_WRITER = 150 if QUICK else 500
NOTIFY_ROUNDS = 3  # after a first round that warms caches
TENANT = "bench"

GOAL_EXPORT = 0.5  # the store's messages/s at least half raw psycopg's
GOAL_EXPORT_RSS_MB = 64.0  # the export's own peak RSS growth, whatever the length
GOAL_FEED = 0.5

RAW_EXPORT = (
    "SELECT m.seq, e.data FROM messages AS m JOIN events AS e"
    " ON e.conversation_id = m.conversation_id AND e.version = m.event_version"
    " WHERE m.conversation_id = %s AND m.seq > %s ORDER BY m.seq LIMIT %s"
)


# --- the export, in child processes --------------------------------------------------


def _status_kb(field: str) -> int | None:
    """A figure of /proc/self/status in kB (Linux), None elsewhere."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _start_measuring() -> int:
    """The resident set now, with the process's peak reset to it (Linux:
    writing 5 to /proc/self/clear_refs), so the peak read after the export
    is the export's own, not an import's transient one."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass
    return _status_kb("VmRSS") or _peak_kb()


def _peak_kb() -> int:
    """The process's peak resident set (VmHWM). Not `ru_maxrss`: a child
    started by vfork and exec inherits its parent's peak in it, and this
    child's parent holds the 100,000 messages it wrote: every run reported
    that, whatever the export used."""
    peak = _status_kb("VmHWM")
    if peak is not None:
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux


async def _child_store(url: str, conversation: str, sink: IO[bytes]) -> dict[str, Any]:
    from store.repository.export import export_pages

    settings = Settings.from_env()
    async with open_repository(url, settings, pool_size=1) as repository:
        store = repository.for_tenant(TENANT)
        before = _start_measuring()
        lines = 0
        started = time.perf_counter()
        async for chunk in export_pages(store, conversation, name=conversation):
            sink.write(chunk)
            lines += chunk.count(b"\n")
        seconds = time.perf_counter() - started
    return {"lines": lines, "seconds": seconds, "rss_before_kb": before, "rss_peak_kb": _peak_kb()}


async def _child_raw(url: str, conversation: str, sink: IO[bytes]) -> dict[str, Any]:
    settings = Settings.from_env()
    conn = await raw_async_connection(url, settings)
    try:
        cursor = await conn.execute(
            "SELECT id FROM conversations WHERE tenant = %s AND key = %s", (TENANT, conversation)
        )
        (cid,) = await cursor.fetchone() or (None,)
        before = _start_measuring()
        lines, after = 0, 0
        started = time.perf_counter()
        while True:
            cursor = await conn.execute(RAW_EXPORT, (cid, after, PAGE))
            rows = await cursor.fetchall()
            sink.write(b"".join(orjson.dumps(data["message"]) + b"\n" for _, data in rows))
            lines += len(rows)
            if len(rows) < PAGE:
                break
            after = rows[-1][0]
        seconds = time.perf_counter() - started
    finally:
        await conn.close()
    return {"lines": lines, "seconds": seconds, "rss_before_kb": before, "rss_peak_kb": _peak_kb()}


def _in_child(side: str, url: str, conversation: str) -> dict[str, Any]:
    found = subprocess.run(
        [sys.executable, "-m", "bench.export_feed", "child", side, url, conversation],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(found.stdout.strip().splitlines()[-1])
    return result


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "messages": runs[0]["lines"],
        "messages_per_s": statistics.median(r["lines"] / r["seconds"] for r in runs),
        "rss_growth_mb": statistics.median(
            (r["rss_peak_kb"] - r["rss_before_kb"]) / 1024 for r in runs
        ),
        "rss_peak_mb": statistics.median(r["rss_peak_kb"] / 1024 for r in runs),
        "runs": runs,
    }


async def write_conversation(repository: Repository) -> str:
    conversation = await repository.create_conversation(metadata={"bench": "export_feed"})
    script = Script(seed=11, tools=True, prefix="x")
    version = conversation.version
    for _ in range(MESSAGES // APPEND_SIZE):
        messages = as_messages(script.take(APPEND_SIZE))
        appended = await repository.append_messages(
            conversation.id, messages, expected_version=version
        )
        version = appended.version
    return str(conversation.id)


def export(url: str, conversation: str) -> dict[str, Any]:
    store: list[dict[str, Any]] = []
    raw: list[dict[str, Any]] = []
    for i in range(EXPORT_REPEATS):
        for side in ("store", "raw") if i % 2 == 0 else ("raw", "store"):
            (store if side == "store" else raw).append(_in_child(side, url, conversation))
    return {"store": _summary(store), "raw": _summary(raw)}


# --- the feed ---------------------------------------------------------------------------


async def feed(repository: Repository, url: str, settings: Settings) -> dict[str, Any]:
    store = repository.for_tenant(TENANT)
    conn = await raw_async_connection(url, settings)

    async def store_read() -> int:
        count, after = 0, FeedVector.origin()
        while True:
            page = await store.read_events(after=after, limit=PAGE)
            count += len(page.events)
            after = parse_position(page.next)
            if not page.more:
                return count

    async def raw_read() -> int:
        count, tx, pos = 0, 0, 0
        while True:
            cursor = await conn.execute(READ_FEED, {"tx": tx, "pos": pos, "limit": PAGE})
            rows = await cursor.fetchall()
            count += len(rows)
            if len(rows) < PAGE:
                return count
            pos, tx = rows[-1][0], rows[-1][6]

    events = 0

    def rate_of(read: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[float]]:
        async def rate() -> float:
            nonlocal events
            started = time.perf_counter()
            events = await read()
            return events / (time.perf_counter() - started)

        return rate

    try:
        rates = await rates_taking_turns(
            {"store": rate_of(store_read), "raw": rate_of(raw_read)}, FEED_REPEATS
        )
    finally:
        await conn.close()
    return {"events": events, **median_rates(rates, "events_per_s")}


# --- what a NOTIFY in the append would cost -----------------------------------------------

NOTIFY_DDL = "CREATE TABLE IF NOT EXISTS notify_bench (id bigserial PRIMARY KEY, data text)"
PLAIN_INSERT = "INSERT INTO notify_bench (data) VALUES (%s)"
NOTIFY_INSERT = (
    "WITH n AS (SELECT pg_notify('convo_feed', '')) INSERT INTO notify_bench (data)"
    " SELECT %s FROM n"
)


async def notify_cost(url: str, settings: Settings) -> dict[str, Any]:
    with raw_sync_connection(url, settings) as conn:
        conn.execute(NOTIFY_DDL)
    conns = [await raw_async_connection(url, settings) for _ in range(NOTIFY_WRITERS)]

    async def writers(statement: str) -> float:
        async def writer(conn: psycopg.AsyncConnection[Any]) -> None:
            for i in range(NOTIFY_PER_WRITER):
                await conn.execute(statement, (f"row {i}",))
                await conn.commit()

        started = time.perf_counter()
        await asyncio.gather(*(writer(c) for c in conns))
        return NOTIFY_WRITERS * NOTIFY_PER_WRITER / (time.perf_counter() - started)

    try:
        rates = await rates_taking_turns(
            {"plain": lambda: writers(PLAIN_INSERT), "notify": lambda: writers(NOTIFY_INSERT)},
            NOTIFY_ROUNDS,
        )
    finally:
        for c in conns:
            await c.close()
    return {"writers": NOTIFY_WRITERS, **median_rates(rates, "appends_per_s")}


# --- the run ---------------------------------------------------------------------------------


async def run(url: str, settings: Settings) -> dict[str, Any]:
    async with open_repository(url, settings, pool_size=2) as repository:
        print(f"writing {MESSAGES:,} messages ...", flush=True)
        conversation = await write_conversation(repository.for_tenant(TENANT))
        vacuum(url, settings)
        print("export ...", flush=True)
        exported = await asyncio.to_thread(export, url, conversation)
        print("feed ...", flush=True)
        fed = await feed(repository, url, settings)
    print("notify cost ...", flush=True)
    notify = await notify_cost(url, settings)
    return {"quick": QUICK, "export": exported, "feed": fed, "notify": notify}


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    store, raw = figures["export"]["store"], figures["export"]["raw"]
    fed, notify = figures["feed"], figures["notify"]
    n = f"{store['messages']:,}"
    # (figure, the store's, the baseline's, unit, the baseline's name, goal, note)
    rows: list[tuple[str, float, float, str, str, tuple[str, float] | None, str]] = [
        (
            f"export of {n} messages (messages/s)",
            store["messages_per_s"],
            raw["messages_per_s"],
            "msg/s",
            "psycopg keyset pages + orjson lines",
            (">=", GOAL_EXPORT),
            "",
        ),
        (
            f"export of {n} messages: the process's peak RSS growth",
            store["rss_growth_mb"],
            raw["rss_growth_mb"],
            "MB",
            "the same raw export",
            None,
            f"goal: under {GOAL_EXPORT_RSS_MB:g} MB whatever the length (flat)",
        ),
        (
            f"tenant feed read of {fed['events']:,} events (events/s)",
            fed["store_events_per_s"],
            fed["raw_events_per_s"],
            "events/s",
            "psycopg, global feed statement",
            (">=", GOAL_FEED),
            "",
        ),
        (
            f"{notify['writers']} writers' appends with pg_notify in the statement (info)",
            notify["notify_appends_per_s"],
            notify["plain_appends_per_s"],
            "appends/s",
            "the same INSERT + COMMIT without it",
            None,
            "",
        ),
    ]
    return [
        comparison(figure, ours, theirs, unit=unit, baseline_name=name, goal=goal, note=note)
        for figure, ours, theirs, unit, name, goal, note in rows
    ]


def main() -> None:
    run_and_show(
        "export_feed",
        run,
        comparisons,
        title="export and feed vs raw psycopg",
        notes=__doc__ or "",
    )


def child(side: str, url: str, conversation: str) -> None:
    """One export in this process (`python -m bench.export_feed child ...`)."""
    export_one = _child_store if side == "store" else _child_raw
    with open(os.devnull, "wb") as sink:
        print(json.dumps(asyncio.run(export_one(url, conversation, sink))), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(*sys.argv[2:5])
    else:
        main()
