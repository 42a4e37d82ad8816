"""Compaction: a job over 1,000 conversations of 2,000 messages each
(`CONVO_BENCH_QUICK=1`: 100 of 500), and the payload build of a compacted
conversation against the same conversation uncompacted.

Each conversation is a coding agent's session (a user request, a tool call
and its result, an answer: four messages of ~200 characters a turn),
loaded 100 messages an append. The job (`store.compaction.CompactionJob`,
default extractive summarizer, 4 conversations at once) compacts every
window over 400 messages down to at most 200 after the boundary, keeping
the system message and the last 2 user messages. Timed: finding the
candidates, a dry run, the real run (conversations/s), and a second run
right after (which finds nothing). Then the payload of one compacted
conversation and of a copy of it left uncompacted (another tenant), built
for OpenAI Chat and Anthropic, interleaved, by one caller on the pool the
app gives a sequential caller, with a garbage collection
(untimed) before each call; then once more back to back, without it (info
rows: the collection's idle gap slows the next round trips, a fixed cost).
Also, for each build, load-independent figures: the round trips it makes
(libpq's trace, one pooled connection: the `Sync`s it sends) and the CPU
time this process spends on it (median of back-to-back calls).

The words search index is dropped first (`convo search-index disable
text`): compaction never reads it and writes one summary a conversation to
it, while loading 2,000,000 messages through it took twice as long.

    python -m bench compaction
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from typing import Any

import psycopg

from bench import harness
from bench.report import comparison, print_comparisons
from hosting.settings import Settings
from store.compaction import CompactionJob, CompactionPolicy
from store.domain.messages import Message, ToolCall
from store.postgres import PostgresStorage, search_indexes
from store.repository import Repository

QUICK = harness.quick_mode()
CONVERSATIONS = 100 if QUICK else 1_000
MESSAGES = 500 if QUICK else 2_000
APPEND = 100
LOADERS = 8
CONCURRENCY = 4
MAX_MESSAGES = 400
POLICY = CompactionPolicy(max_messages=MAX_MESSAGES, keep_last={"user": 2})
FORMATS = ("openai-chat", "anthropic")
REPEATS = 10 if QUICK else 30
TEXT = "The parser drops the last token when the input ends without a newline; " * 3


def _session(length: int) -> list[Message]:
    messages = [Message(role="system", content="You are a careful coding agent.")]
    k = 0
    while len(messages) < length:
        call_id = f"call_{k}"
        messages += [
            Message(role="user", content=f"Request {k}: {TEXT}"),
            Message(
                role="assistant",
                content="Looking.",
                tool_calls=(
                    ToolCall(id=call_id, name="read_file", arguments={"path": f"f{k}.py"}),
                ),
            ),
            Message(role="tool", tool_call_id=call_id, content=f"contents {k}: {TEXT}"),
            Message(role="assistant", content=f"Answer {k}: {TEXT}"),
        ]
        k += 1
    return messages[:length]


async def _load(repository: Repository, count: int, session: list[Message]) -> list[str]:
    gate = asyncio.Semaphore(LOADERS)

    async def one() -> str:
        async with gate:
            cid = (await repository.create_conversation()).id
            for start in range(0, len(session), APPEND):
                await repository.append_messages(cid, session[start : start + APPEND])
            return cid

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def run(url: str, settings: Settings) -> dict[str, Any]:
    with harness.raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        search_indexes.disable(conn, "text")
    session = _session(MESSAGES)
    async with harness.open_repository(url, settings, pool_size=2 * CONCURRENCY + LOADERS) as base:
        repository = base.for_tenant("bench")
        started = time.perf_counter()
        made = await _load(repository, CONVERSATIONS, session)
        load_s = time.perf_counter() - started
        untouched = base.for_tenant("bench-uncompacted")
        (twin,) = await _load(untouched, 1, session)

        job = CompactionJob(repository, POLICY, concurrency=CONCURRENCY)
        started = time.perf_counter()
        candidates = await job.candidates()
        candidates_s = time.perf_counter() - started
        started = time.perf_counter()
        dry = await job.run(dry_run=True)
        dry_s = time.perf_counter() - started
        started = time.perf_counter()
        report = await job.run()
        run_s = time.perf_counter() - started
        started = time.perf_counter()
        again = await job.run()
        again_s = time.perf_counter() - started

        compacted = made[0]
        window_after = len(await repository.visible_window(compacted, agent_id="main"))
    # The builds are one caller's, one at a time: timed on the pool the app
    # gives such a caller (`harness.SEQUENTIAL_POOL`), as the read path's
    # figures are. On the loaders' pool of 16 connections opened up front,
    # each build went to the connection used longest ago, whose server
    # backend's caches were cold and which had planned each statement anew
    # (PostgreSQL keeps a generic plan only after five executions on a
    # connection): a fixed cost on every call, which weighs on the small
    # compacted build most (docs/bench-methods.md).
    async with harness.open_repository(
        url, settings, pool_size=harness.SEQUENTIAL_POOL, min_size=1
    ) as reader:
        actions = {}
        for fmt in FORMATS:
            actions[f"compacted_{fmt}"] = _assemble(reader.for_tenant("bench"), compacted, fmt)
            actions[f"uncompacted_{fmt}"] = _assemble(
                reader.for_tenant("bench-uncompacted"), twin, fmt
            )
        samples = await harness.time_interleaved(actions, REPEATS, warmup=2, collect=True)
        # The same calls back to back, without a collection before each: the
        # collection leaves an idle gap of tens of milliseconds, after which
        # the next round trips are slow on this VM (docs/bench-methods.md), a
        # fixed cost that weighs on the small compacted build most. For
        # information.
        warm = await harness.time_interleaved(actions, REPEATS, warmup=2)
    async with harness.open_repository(url, settings, pool_size=1) as one:
        builds = {
            "compacted": _assemble(one.for_tenant("bench"), compacted, FORMATS[0]),
            "uncompacted": _assemble(one.for_tenant("bench-uncompacted"), twin, FORMATS[0]),
        }
        round_trips = {name: await _round_trips(one, build) for name, build in builds.items()}
        cpu_ms = {name: await _cpu_ms(build) for name, build in builds.items()}
    statuses = {s: report.count(s) for s in {r.status for r in report.results}}
    return {
        "conversations": CONVERSATIONS,
        "messages_each": MESSAGES,
        "policy": POLICY.model_dump(mode="json"),
        "concurrency": CONCURRENCY,
        "load_s": load_s,
        "load_messages_per_s": CONVERSATIONS * MESSAGES / load_s,
        "candidates": len(candidates),
        "candidates_s": candidates_s,
        "dry_run_s": dry_s,
        "dry_run_planned": dry.count("planned"),
        "run_s": run_s,
        "run_statuses": statuses,
        "conversations_per_s": report.count("compacted") / run_s,
        "rerun_s": again_s,
        "rerun_results": len(again.results),
        "window_after": window_after,
        "median_ms": {name: harness.median_ms(s) for name, s in samples.items()},
        "back_to_back_median_ms": {name: harness.median_ms(s) for name, s in warm.items()},
        "round_trips_per_build": round_trips,
        "cpu_ms_per_build": cpu_ms,
    }


def _assemble(repository: Repository, cid: str, fmt: str) -> Any:
    async def build(_: int) -> object:
        return await repository.assemble(cid, format=fmt)

    return build


async def _round_trips(repository: Repository, build: Any) -> int:
    """The `Sync`s one call of `build` sends, on `repository`'s only connection,
    once it is steady: two calls first, since the first finds the batch the
    window is in (a compacted one is not in batch 1, where a new storage
    looks first) and the second prepares the statement for that batch (a
    statement's first use on a connection is parsed in a round trip of its
    own)."""
    await build(0)
    await build(0)
    storage = repository.storage
    assert isinstance(storage, PostgresStorage)
    pool = storage.pool
    with tempfile.TemporaryFile("w+") as trace:
        async with pool.connection() as conn:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        await build(1)
        async with pool.connection() as conn:
            conn.pgconn.untrace()
        trace.seek(0)
        sent = [line.rstrip("\n").split("\t") for line in trace if line.startswith("F")]
        return sum(message[2] == "Sync" for message in sent)


async def _cpu_ms(build: Any) -> float:
    """This process's CPU time per call of `build`, back to back (median)."""
    spent = []
    for i in range(REPEATS):
        started = time.process_time()
        await build(i)
        spent.append(time.process_time() - started)
    return statistics.median(spent) * 1000


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    ms = figures["median_ms"]
    # A payload build costs O(visible window): after compaction it should
    # cost about the visible share of the uncompacted build (plus slack for
    # the fixed part: the profile, the slots, one round trip).
    share = figures["window_after"] / figures["messages_each"]
    rows = [
        comparison(
            f"payload build ({fmt}) after compaction, {figures['window_after']} of "
            f"{figures['messages_each']} messages visible",
            ms[f"compacted_{fmt}"],
            ms[f"uncompacted_{fmt}"],
            unit="ms",
            baseline_name="the same conversation uncompacted",
            goal=("<=", round(share * 1.5, 2)),
        )
        for fmt in FORMATS
    ]
    warm = figures.get("back_to_back_median_ms")
    if warm is not None:
        rows += [
            comparison(
                f"the same, {fmt}, calls back to back (no collection before each; info)",
                warm[f"compacted_{fmt}"],
                warm[f"uncompacted_{fmt}"],
                unit="ms",
                baseline_name="the same conversation uncompacted",
            )
            for fmt in FORMATS
        ]
    return rows


def main() -> None:
    figures = harness.run_and_record("compaction", run, comparisons, notes=__doc__ or "")
    print(
        f"compacted {figures['run_statuses']} of {figures['conversations']} conversations of "
        f"{figures['messages_each']} messages in {figures['run_s']:.1f}s "
        f"({figures['conversations_per_s']:.1f} conversations/s); candidates in "
        f"{figures['candidates_s']:.2f}s, dry run {figures['dry_run_s']:.1f}s, "
        f"re-run {figures['rerun_s']:.2f}s ({figures['rerun_results']} to do); "
        f"load {figures['load_s']:.0f}s"
    )
    print(
        f"per build, compacted against uncompacted: round trips "
        f"{figures['round_trips_per_build']}, CPU ms {figures['cpu_ms_per_build']}"
    )
    print_comparisons(f"compaction ({'quick' if QUICK else 'full'} run)", figures["comparisons"])


if __name__ == "__main__":
    main()
