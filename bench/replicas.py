"""Agents' appends beside analysts' reads: on a read replica, or on the primary.

Starts its own primary and streaming standby (`bench.standby`: initdb and
`pg_basebackup -R` on loopback ports, the embedded server's binaries), so
it runs by name only: `python -m bench replicas`.

- Seed: CONVERSATIONS conversations of SEED_MESSAGES messages each (user,
  assistant, a tool call and its result, ~400 characters; `bench.workload`).
- Agents: AGENTS tasks in this process, each appending one message at a
  time to its own conversations in turn (the append path of a busy
  service: one round trip each, `store.postgres.optimistic`), through a
  storage configured with the standby (so each commit's LSN is read, in
  the same round trip). Every append's latency is kept.
- Analysts: ANALYSTS tasks in a child process of their own (their client
  work does not share this process's event loop), each looping over a
  search (`mode=text`), the export of a conversation (its events, pages of
  1,000) and a page of 1,000 of the tenant feed from its start.
- Phases, PHASE_S seconds each, taking turns ROUNDS times (each round
  starting with the next phase): the agents
  alone; with the analysts on a storage that reads from the standby; with
  the analysts on a storage without replicas (everything on the primary);
  and the agents alone through a storage with no replica configured (no
  LSN read at all: what the replica support costs an append).

Goal: the agents' p99 with the analysts on the replica at most 1.1× their
p99 alone. A replica is another server: on a machine of two CPUs or more,
the primary and this process (the agents) run on CPU 0 only, the standby
and the analysts' process on CPU 1 only (`StandbyPair.pin`), so the
standby's work is not taken from the primary's CPU, as on a server of its
own. With the analysts on the primary, their queries run on CPU 0 beside
the agents' appends, as they would on one server. (`cpus` in the results
says whether the run was pinned; unpinned, primary and standby share every
core and the ratio is an upper bound.)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.harness import machine_facts, quick_mode
from bench.report import comparison, print_comparisons, write_results
from bench.standby import standby_pair
from bench.workload import Script, as_messages
from hosting import migrate
from hosting.settings import Settings
from store import Message, Repository
from store.domain.search import search_query
from store.postgres import PostgresStorage
from store.repository.export import export_pages

QUICK = quick_mode()
CONVERSATIONS = 100 if QUICK else 400
SEED_MESSAGES = 40
AGENTS = 8
PER_AGENT = CONVERSATIONS // AGENTS
ANALYSTS = 4
PHASE_S = 5.0 if QUICK else 15.0
ROUNDS = 1 if QUICK else 3
TENANT = "bench"
GOAL_P99 = 1.1
# How stale the analysts' reads may be (CONVO_REPLICA_MAX_LAG_MS): a report
# or a search over history takes seconds of lag, as an operator would set
# for them; the default (1 s) suits reads that must be near the present.
# A standby further behind is skipped and the reads go to the primary, so
# with a tight bound a standby that replays slowly under the analysts' own
# queries sends half of them back to the primary.
ANALYSTS_MAX_LAG_MS = 30_000

PHASES = ("alone", "analysts_on_replica", "analysts_on_primary", "alone_no_replicas")


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _seed(storage: PostgresStorage) -> list[str]:
    repo = Repository(storage, tenant=TENANT)
    script = Script(seed=7, tools=True, prefix="r")
    ids = []
    for n in range(CONVERSATIONS):
        cid = (await repo.create_conversation(f"agent-{n}")).id
        await repo.append_messages(cid, as_messages(script.take(SEED_MESSAGES)))
        ids.append(cid)
    return ids


async def _agents(storage: PostgresStorage, ids: list[str], seconds: float) -> list[float]:
    """Append for `seconds`; each append's latency in milliseconds."""
    repo = Repository(storage, tenant=TENANT)
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def agent(mine: list[str]) -> None:
        n = 0
        while time.monotonic() < deadline:
            cid = mine[n % len(mine)]
            n += 1
            message = Message(role="user", content=f"step {n}: " + "the parser test is flaky " * 8)
            started = time.perf_counter()
            await repo.append_messages(cid, [message])
            latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(agent(ids[i::AGENTS]) for i in range(AGENTS)))
    return latencies


async def _analysts(primary: str, replica: str | None, seconds: float) -> dict[str, Any]:
    """The analysts' loop for `seconds` (the child process's work)."""
    routed = {"replica": 0, "primary": 0}

    def route(reader: str, on_replica: bool) -> None:
        routed["replica" if on_replica else "primary"] += 1

    loops = 0
    async with PostgresStorage.connect(
        primary,
        replicas=[replica] if replica else [],
        max_replica_lag_ms=ANALYSTS_MAX_LAG_MS,
        on_read_routed=route,
    ) as storage:
        repo = Repository(storage, tenant=TENANT)
        deadline = time.monotonic() + seconds
        pick = random.Random(3)

        async def analyst() -> None:
            nonlocal loops
            while time.monotonic() < deadline:
                await repo.search_messages(search_query(q="parser", mode="text", limit=50))
                cid = f"agent-{pick.randrange(CONVERSATIONS)}"
                async for _ in export_pages(repo, cid, events=True, page_size=1000):
                    pass
                await repo.read_events(limit=1000)
                loops += 1

        await asyncio.gather(*(analyst() for _ in range(ANALYSTS)))
    return {"loops": loops, "reads_routed": routed}


# Where each side runs on a machine of 2 CPUs or more (module docstring).
PRIMARY_SIDE, STANDBY_SIDE = {0}, {1}


def _pinned() -> bool:
    return hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2


def _start_analysts(
    primary: str, replica: str | None, seconds: float, *, pinned: bool
) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "bench.replicas", "analysts", primary, replica or "-"]
    child = subprocess.Popen(
        [*command, str(seconds)], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    if pinned:
        os.sched_setaffinity(child.pid, STANDBY_SIDE)
    return child


def _finished(child: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = child.communicate(timeout=120)
    if child.returncode != 0:
        raise RuntimeError("the analysts' process failed")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


async def _run(primary: str, standby: str, *, pinned: bool) -> dict[str, Any]:
    latencies: dict[str, list[float]] = {phase: [] for phase in PHASES}
    analysts: dict[str, list[dict[str, Any]]] = {phase: [] for phase in PHASES}
    async with (
        PostgresStorage.connect(primary, replicas=[standby]) as with_replica,
        PostgresStorage.connect(primary) as without,
    ):
        ids = await _seed(with_replica)
        await _agents(with_replica, ids, 1.0)  # warm both paths' prepared statements
        await _agents(without, ids, 1.0)
        for round_ in range(ROUNDS):
            # Each round starts with another phase: what the machine does
            # meanwhile weighs on every phase alike.
            for phase in PHASES[round_ % len(PHASES) :] + PHASES[: round_ % len(PHASES)]:
                child = None
                if phase == "analysts_on_replica":
                    child = _start_analysts(primary, standby, PHASE_S + 0.5, pinned=pinned)
                elif phase == "analysts_on_primary":
                    child = _start_analysts(primary, None, PHASE_S + 0.5, pinned=pinned)
                if child is not None:
                    await asyncio.sleep(0.5)  # its imports and connections
                storage = without if phase == "alone_no_replicas" else with_replica
                latencies[phase] += await _agents(storage, ids, PHASE_S)
                if child is not None:
                    analysts[phase].append(await asyncio.to_thread(_finished, child))
    return {
        "phases": {
            phase: {
                "appends": len(samples),
                "p50_ms": statistics.median(samples),
                "p99_ms": _percentile(samples, 0.99),
                "analysts": analysts[phase],
            }
            for phase, samples in latencies.items()
        },
        "agents": AGENTS,
        "analysts": ANALYSTS,
        "conversations": CONVERSATIONS,
        "phase_s": PHASE_S,
        "rounds": ROUNDS,
    }


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    phases = figures["phases"]
    alone = phases["alone"]
    rows = []
    for phase, name, goal in (
        ("analysts_on_replica", "analysts on the replica", ("<=", GOAL_P99)),
        ("analysts_on_primary", "analysts on the primary", None),
    ):
        for percentile, its_goal in (("p99", goal), ("p50", None)):
            rows.append(
                comparison(
                    f"agents' append {percentile}, {name}",
                    phases[phase][f"{percentile}_ms"],
                    alone[f"{percentile}_ms"],
                    unit="ms",
                    baseline_name="agents alone",
                    goal=its_goal,
                )
            )
    no_replicas = phases["alone_no_replicas"]
    for figure in ("p50_ms", "p99_ms"):
        rows.append(
            comparison(
                f"agents' append {figure[:3]} alone, replica configured (commit LSN read)",
                alone[figure],
                no_replicas[figure],
                unit="ms",
                baseline_name="no replica configured",
            )
        )
    return rows


def main() -> None:
    settings = Settings.from_env()
    load_before = os.getloadavg()

    with standby_pair(migrate=lambda url: migrate.upgrade_database(url, settings)) as pair:
        primary, standby = pair.primary.url("convo"), pair.standby.url("convo")
        pinned = _pinned()
        cpus = None
        if pinned:
            pair.primary.pin(PRIMARY_SIDE)
            pair.standby.pin(STANDBY_SIDE)
            os.sched_setaffinity(0, PRIMARY_SIDE)
            cpus = {"primary and agents": [*PRIMARY_SIDE], "standby and analysts": [*STANDBY_SIDE]}
        figures = asyncio.run(_run(primary, standby, pinned=pinned))
        figures["cpus"] = cpus
        machine = machine_facts(primary, settings, load_before)
    figures["comparisons"] = comparisons(figures)
    write_results("replicas", figures, notes=__doc__ or "", machine=machine)
    mode = "quick" if QUICK else "full"
    print_comparisons(
        f"appends beside analysts, replica vs primary ({mode} run)", figures["comparisons"]
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["analysts"]:
        primary_url, replica_url, duration = sys.argv[2:5]
        replica_or_none = None if replica_url == "-" else replica_url
        result = asyncio.run(_analysts(primary_url, replica_or_none, float(duration)))
        print(json.dumps(result), flush=True)
    else:
        main()
