"""The HTTP API under a bounded load on loopback, against the same operations
called in-process and against raw psycopg, in the same run.

The server is the real one: `convo serve --no-migrate` as a subprocess on a
free 127.0.0.1 port against the benchmark's database, with 1 worker process
and then with `--workers 2`, logging as deployed (one JSON access line per
request, to a file). Its key is made with `hosting.keys.create_key`, as
`convo keys create` makes one, for the tenant the in-process repository uses,
so both sides see the same conversations.

The load generator is this process: one keep-alive HTTP/1.1 connection per
virtual client (`bench.http_client`, a lean client: httpx cost several
times its CPU a request on these 2 shared cores, docs/bench-methods.md),
bodies serialized with orjson before the clock starts.

- closed loop, 1, 8 and 32 virtual clients, each on its own conversation,
  each sending its next request only when the previous one answered: at most
  that many requests are ever in flight, so latency is the server's, not a
  queue in front of it. Each level runs a warm-up (untimed: connections open,
  pools fill), then a fixed window; requests/s = completions in the window ÷
  its length; median and p99 of the requests started in it.
- append: `POST /conversations/{id}/messages`, one message (~400 chars; a tool
  call and its result every 5th turn, as bench.workload's conversation) with
  the expected version; vs `Repository.append_messages` of the same messages
  in this process (its pool the server's size, 10, opened as the server's: one
  connection, more when callers wait), vs raw async psycopg
  `INSERT`+`COMMIT` of the same JSON (one connection per client), and (for
  information) vs the floor app (`bench.http_floor`: a bare ASGI app under
  the same uvicorn, one worker, that parses, validates and appends and does
  nothing else: no key, no log line, no metrics). With one worker the four
  take turns level by level; the 2-worker server runs after it, against
  the same in-process and raw baselines.
- payload build: `POST /conversations/{id}/assemble` (openai-chat) of a
  1,000-message conversation (one per client, built before), vs
  `Repository.assemble` in this process. The HTTP side also serializes and
  sends the payload and the generator receives it. The HTTP answer carries
  the diagnostics, whose stable-prefix fingerprint the in-process call
  computes only when read: a second in-process side (for information) reads
  them as the answer has them (`diagnostics.model_dump_json()`).
- open loop (append, for information): requests sent on a fixed schedule at
  half the closed loop's 32-client rate, round robin over 32 conversations
  (no tool calls and no expected version: requests to one conversation may
  overtake each other), at most 64 in flight (a request due while 64 are
  outstanding is skipped and counted). Latency counts from when the request
  was due, so a stalled server shows in it (no coordinated omission).

With `--workers N`, uvicorn's supervisor binds the listening socket itself
and leaves its protocol number at 0, so asyncio does not set TCP_NODELAY on
accepted connections (uvicorn issue #3149): unless `convo serve` sets it,
each keep-alive response waits for the client's delayed ACK (~40 ms on
Linux), which the 2-worker figures then show at every level.

CPU: this machine has 2 cores shared by PostgreSQL, the server and the
generator. Each level records this process's CPU time (the generator's, for
HTTP; the store's own work, in-process), the server's processes' (from
/proc), and the whole machine's busy time, so the generator's share of the
cores is visible. Figures on a loaded machine are noisy; the ratios, taken
in the same run, less so.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import httpx
import orjson
import psycopg

from bench.harness import (
    open_repository,
    quick_mode,
    raw_async_connection,
    run_and_show,
)
from bench.http_client import Connection, Pool
from bench.report import comparison, print_table
from bench.workload import Script, as_json, as_messages
from bench.write_path import Stream, raw_insert, setup_raw_table
from hosting.engines import make_async_engine
from hosting.keys import create_key
from hosting.settings import Settings
from store.domain.messages import Message
from store.repository import DEFAULT_TENANT, Conversation, Repository

QUICK = quick_mode()
CONCURRENCY = (1, 8, 32)
WORKERS = (1, 2)
WARMUP_S = 0.3 if QUICK else 1.0
WINDOW_S = 1.5 if QUICK else 5.0
ASSEMBLE_MESSAGES = 1_000
SERVER_POOL = 10  # the server's storage pool (hosting.bootstrap.open_storage)
# Bodies are prepared before the clock for at most these rates (per client, in
# all), well above what 2 cores reach; a client that runs out stops (`capped`).
RATE_CEILINGS = {"store": (2_000, 5_000), "http": (2_000, 5_000), "raw": (5_000, 15_000)}
OPEN_LOOP_SHARE = 0.5
OPEN_LOOP_CONVERSATIONS = 32
MAX_IN_FLIGHT = 64
SERVER_START_S = 90.0
CONVO = [sys.executable, "-c", "from convo import main; main()"]
FLOOR_SIDE = "http_floor"

# What one request does: None when it got the answer it expects, else a label.
Sender = Callable[[int], Awaitable[str | None]]


# --- the load generator ---------------------------------------------------------------


@dataclass
class Load:
    """What one run of the generator saw: latencies (seconds) of the requests
    started in the window, completions in it, failures of any request."""

    latencies: list[float] = field(default_factory=list)
    completed: int = 0
    sent: int = 0
    skipped: int = 0
    capped: bool = False
    errors: Counter[str] = field(default_factory=Counter)
    window_s: float = 0.0
    max_in_flight: int = 0

    def figures(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)
        return {
            "requests_per_s": self.completed / self.window_s if self.window_s else None,
            "median_ms": statistics.median(ordered) * 1000 if ordered else None,
            "p99_ms": percentile(ordered, 0.99) * 1000 if ordered else None,
            "timed_requests": len(ordered),
            "sent": self.sent,
            "errors": dict(self.errors),
            "capped": self.capped,
            **(
                {"skipped": self.skipped, "max_in_flight": self.max_in_flight}
                if self.skipped or self.max_in_flight
                else {}
            ),
        }


def percentile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted values."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


async def _outcome(send: Sender, i: int) -> str | None:
    try:
        return await send(i)
    except Exception as error:  # a failure is counted; the load goes on
        return type(error).__name__


async def closed_loop(senders: list[Sender], cap: int, warmup_s: float, window_s: float) -> Load:
    """Each sender is one virtual client: request `i + 1` leaves when request `i`
    has answered, from now until the window ends (or `cap` requests)."""
    load = Load(window_s=window_s)
    started = time.perf_counter()
    window_start = started + warmup_s
    window_end = window_start + window_s

    async def client(send: Sender) -> None:
        for i in range(cap):
            began = time.perf_counter()
            if began >= window_end:
                return
            failure = await _outcome(send, i)
            done = time.perf_counter()
            load.sent += 1
            if failure is not None:
                load.errors[failure] += 1
            if began >= window_start:
                load.latencies.append(done - began)
            if window_start <= done < window_end:
                load.completed += 1
        load.capped = True

    await asyncio.gather(*(client(send) for send in senders))
    return load


async def open_loop(send: Sender, rate: float, window_s: float, max_in_flight: int) -> Load:
    """Request `i` is due at `i / rate` seconds; it leaves then unless
    `max_in_flight` requests are outstanding (then it is skipped). Latency is
    from when it was due."""
    load = Load(window_s=window_s)
    count = int(rate * window_s)
    in_flight: set[asyncio.Task[None]] = set()
    start = time.perf_counter()
    window_end = start + window_s

    async def one(i: int, due: float) -> None:
        failure = await _outcome(send, i)
        done = time.perf_counter()
        load.sent += 1
        load.latencies.append(done - due)
        if failure is not None:
            load.errors[failure] += 1
        if done < window_end:
            load.completed += 1

    for i in range(count):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if len(in_flight) >= max_in_flight:
            load.skipped += 1
            continue
        task = asyncio.create_task(one(i, due))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
        load.max_in_flight = max(load.max_in_flight, len(in_flight))
    while in_flight:
        await asyncio.gather(*in_flight)
    # Achieved rate over the whole schedule, stragglers included.
    load.completed = load.sent - sum(load.errors.values())
    load.window_s = time.perf_counter() - start
    return load


# --- CPU accounting ------------------------------------------------------------------------

TICKS = os.sysconf("SC_CLK_TCK")


def process_tree_cpu_s(root: int) -> float:
    """User + system CPU seconds of `root` and its descendants, from /proc."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    return sum(cpu.get(pid, 0.0) for pid in tree)


def machine_busy_s() -> float:
    """CPU seconds all cores spent not idle (nor waiting for I/O), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(values) - values[3] - values[4]) / TICKS


async def measured(run: Awaitable[Load], server_pid: int | None) -> dict[str, Any]:
    """The figures of the load `run` (not started yet) with the CPU it cost:
    this process, the server, the machine."""
    own, busy = time.process_time(), machine_busy_s()
    server = process_tree_cpu_s(server_pid) if server_pid else 0.0
    wall = time.perf_counter()
    load = await run
    wall = time.perf_counter() - wall
    own, busy = time.process_time() - own, machine_busy_s() - busy
    figures = load.figures()
    figures |= {
        "wall_s": wall,
        "this_process_cpu_s": own,
        "this_process_cpu_per_request_us": own / load.sent * 1e6 if load.sent else None,
        "this_process_cores": own / wall,
        "machine_busy_cores": busy / wall,
    }
    if server_pid:
        server = process_tree_cpu_s(server_pid) - server
        figures |= {
            "server_cpu_s": server,
            "server_cpu_per_request_us": server / load.sent * 1e6 if load.sent else None,
            "server_cores": server / wall,
        }
    return figures


# --- the server -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    base_url: str
    pid: int
    workers: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# The floor side's server (bench.http_floor): uvicorn as `convo serve` runs it.
FLOOR = [
    sys.executable,
    "-m",
    "uvicorn",
    "--factory",
    "bench.http_floor:app",
    "--no-access-log",
    "--no-server-header",
    "--log-level",
    "warning",
]


@contextmanager
def serving(url: str, workers: int, log: IO[str], *, floor: bool = False) -> Iterator[Server]:
    """`convo serve` (`floor`: the floor app) on a free loopback port against
    `url`, until the block ends."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url}
    where = ["--host", "127.0.0.1", "--port", str(port)]
    command = (
        [*FLOOR, *where]
        if floor
        else [*CONVO, "serve", *where, "--workers", str(workers), "--no-migrate"]
    )
    process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"convo serve exited with {process.returncode} (log: {log.name})"
                )
            try:
                if httpx.get(f"{base}/ready", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"convo serve did not become ready (log: {log.name})")
            time.sleep(0.2)
        yield Server(base, process.pid, workers)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def create_api_key(url: str, settings: Settings) -> str:
    """A key for the in-process repository's tenant, as `convo keys create` makes it."""
    engine = make_async_engine(url, settings, pool_size=1, max_overflow=0)
    try:
        _, plaintext = await create_key(engine, DEFAULT_TENANT, "bench http_load")
    finally:
        await engine.dispose()
    return plaintext


@dataclass(frozen=True)
class Client:
    """Where and as whom the generator's connections talk to the server."""

    base_url: str
    headers: dict[str, str]

    def connection(self) -> Connection:
        return Connection(self.base_url, self.headers)


def http_client(server: Server, key: str) -> Client:
    return Client(
        server.base_url,
        {"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )


# --- the sides: senders prepared before the clock -----------------------------------------


def cap_for(side: str, clients: int) -> int:
    """Requests prepared per client for one level."""
    per_client, total = RATE_CEILINGS["http" if side.startswith("http") else side]
    rate = min(per_client, total / clients)
    return math.ceil(rate * (WARMUP_S + WINDOW_S))


def scripts(clients: int, cap: int) -> list[list[dict[str, Any]]]:
    """Client `k`'s messages, the same on every side."""
    return [Script(seed=k, tools=True, prefix=f"c{k}").take(cap) for k in range(clients)]


def path(conversation_id: object, action: str) -> str:
    return f"/conversations/{quote(str(conversation_id), safe='')}/{action}"


async def http_conversation(http: Connection | Pool) -> tuple[str, int]:
    response = await http.post("/conversations", b'{"metadata":{"bench":"http_load"}}')
    if response.status != 201:
        raise RuntimeError(f"creating a conversation answered {response.status}")
    created = orjson.loads(response.body)
    return str(created["id"]), int(created["version"])


def _http_sender(http: Connection, target: str, bodies: list[bytes], ok: int) -> Sender:
    async def send(i: int) -> str | None:
        response = await http.post(target, bodies[i % len(bodies)])
        return None if response.status == ok else str(response.status)

    return send


@asynccontextmanager
async def own_clients(http: Client, clients: int) -> AsyncIterator[list[Connection]]:
    """One keep-alive connection per virtual client, as an agent's SDK
    client keeps one; closed when the level ends."""
    own = [http.connection() for _ in range(clients)]
    try:
        yield own
    finally:
        for connection in own:
            await connection.close()


async def http_appends(https: list[Connection], cap: int) -> list[Sender]:
    """Client `k` appends to its own conversation through `https[k]`."""
    senders = []
    for http, raw in zip(https, scripts(len(https), cap), strict=True):
        cid, version = await http_conversation(http)
        bodies = [
            orjson.dumps({"messages": [m], "expected_version": version + i})
            for i, m in enumerate(raw)
        ]
        senders.append(_http_sender(http, path(cid, "messages"), bodies, 201))
    return senders


def _store_append_sender(
    repository: Repository, conversation: Conversation, messages: list[Message]
) -> Sender:
    async def send(i: int) -> str | None:
        await repository.append_messages(
            conversation.id, [messages[i]], expected_version=conversation.version + i
        )
        return None

    return send


async def store_appends(repository: Repository, clients: int, cap: int) -> list[Sender]:
    senders = []
    for raw in scripts(clients, cap):
        conversation = await repository.create_conversation(metadata={"bench": "http_load"})
        senders.append(_store_append_sender(repository, conversation, as_messages(raw)))
    return senders


def _raw_append_sender(conn: psycopg.AsyncConnection[Any], texts: list[str]) -> Sender:
    cid = uuid.uuid4()

    async def send(i: int) -> str | None:
        await raw_insert(conn, cid, texts[i])
        return None

    return send


@asynccontextmanager
async def raw_appends(
    url: str, settings: Settings, clients: int, cap: int
) -> AsyncIterator[list[Sender]]:
    conns = [await raw_async_connection(url, settings) for _ in range(clients)]
    try:
        yield [
            _raw_append_sender(conn, as_json(raw))
            for conn, raw in zip(conns, scripts(clients, cap), strict=True)
        ]
    finally:
        for conn in conns:
            await conn.close()


ASSEMBLE_BODY = orjson.dumps({"format": "openai-chat"})


def http_assembles(https: list[Connection], conversations: list[Any]) -> list[Sender]:
    """Client `k` builds conversation `k`'s payload through `https[k]`."""
    return [
        _http_sender(http, path(conversations[k], "assemble"), [ASSEMBLE_BODY], 200)
        for k, http in enumerate(https)
    ]


def _store_assemble_sender(
    repository: Repository, conversation_id: Any, *, diagnostics: bool
) -> Sender:
    async def send(i: int) -> str | None:
        assembly = await repository.assemble(conversation_id, format="openai-chat")
        if diagnostics:
            assembly.diagnostics.model_dump_json()
        return None

    return send


def store_assembles(
    repository: Repository, conversations: list[Any], clients: int, *, diagnostics: bool
) -> list[Sender]:
    return [
        _store_assemble_sender(repository, conversations[k], diagnostics=diagnostics)
        for k in range(clients)
    ]


async def long_conversations(repository: Repository, count: int) -> list[Any]:
    """`count` conversations of ASSEMBLE_MESSAGES messages (tool calls every 5th turn)."""
    ids = []
    for k in range(count):
        stream = await Stream.create(repository)
        script = Script(seed=500 + k, tools=True, prefix="asm")
        for _ in range(ASSEMBLE_MESSAGES // 100):
            await stream.append(as_messages(script.take(100)))
        ids.append(stream.id)
    return ids


# --- the run ------------------------------------------------------------------------------------


def _rotated(sides: list[str], turn: int) -> list[str]:
    shift = turn % len(sides)
    return sides[shift:] + sides[:shift]


@dataclass
class Sides:
    """Everything the levels run against; `results[operation][side][clients]`."""

    url: str
    settings: Settings
    repository: Repository
    conversations: list[Any]
    results: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {"append": {}, "assemble": {}}
    )
    floor: tuple[Client, int] | None = None  # the floor app's server: how to talk to it, its pid

    async def append(self, side: str, clients: int, http: Client, pid: int) -> None:
        cap = cap_for(side, clients)
        if side == FLOOR_SIDE:
            assert self.floor is not None
            http, pid = self.floor
        if side == "raw":
            async with raw_appends(self.url, self.settings, clients, cap) as senders:
                figures = await measured(closed_loop(senders, cap, WARMUP_S, WINDOW_S), None)
        elif side == "store":
            senders = await store_appends(self.repository, clients, cap)
            figures = await measured(closed_loop(senders, cap, WARMUP_S, WINDOW_S), None)
        else:
            async with own_clients(http, clients) as https:
                senders = await http_appends(https, cap)
                figures = await measured(closed_loop(senders, cap, WARMUP_S, WINDOW_S), pid)
        self.results["append"].setdefault(side, {})[str(clients)] = figures

    async def assemble(self, side: str, clients: int, http: Client, pid: int) -> None:
        if side in ("store", "store_diagnostics"):
            senders = store_assembles(
                self.repository,
                self.conversations,
                clients,
                diagnostics=side == "store_diagnostics",
            )
            figures = await measured(closed_loop(senders, 10**9, WARMUP_S, WINDOW_S), None)
        else:
            async with own_clients(http, clients) as https:
                senders = http_assembles(https, self.conversations[:clients])
                figures = await measured(closed_loop(senders, 10**9, WARMUP_S, WINDOW_S), pid)
        self.results["assemble"].setdefault(side, {})[str(clients)] = figures


async def one_server(sides: Sides, server: Server, http: Client) -> dict[str, Any]:
    """Every level against `server`, with the in-process and raw sides taking
    turns with it on the first server; its open-loop figures."""
    http_side = f"http_{server.workers}w"
    first = server.workers == WORKERS[0]
    compared = (
        ("append", ["store", "raw", *([FLOOR_SIDE] if sides.floor else [])]),
        ("assemble", ["store", "store_diagnostics"]),
    )
    for operation, baselines in compared:
        for turn, clients in enumerate(CONCURRENCY):
            for side in _rotated([http_side, *(baselines if first else [])], turn):
                print(f"{operation}, {clients} clients, {side} ...", flush=True)
                level = sides.append if operation == "append" else sides.assemble
                await level(side, clients, http, server.pid)
    top = sides.results["append"][http_side][str(max(CONCURRENCY))]["requests_per_s"]
    rate = OPEN_LOOP_SHARE * top
    print(f"append, open loop at {rate:.0f}/s, {http_side} ...", flush=True)
    pool = Pool(http.base_url, http.headers)
    try:
        send = await open_loop_sender(pool, math.ceil(rate * WINDOW_S))
        figures = await measured(open_loop(send, rate, WINDOW_S, MAX_IN_FLIGHT), server.pid)
    finally:
        await pool.close()
    return {"offered_per_s": rate, **figures}


async def run(url: str, settings: Settings) -> dict[str, Any]:
    setup_raw_table(url, settings)
    key = await create_api_key(url, settings)
    open_loops: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="convo-bench-http-") as tmp:
        log_path = Path(tmp) / "serve.log"
        # Opened as the server opens its own (one connection, more when callers
        # wait): opened all up front, one client's calls went to each of the ten
        # in turn and found its server backend cold (docs/bench-methods.md),
        # which the server's single busy connection never does.
        async with open_repository(url, settings, pool_size=SERVER_POOL, min_size=1) as repository:
            count = max(CONCURRENCY)
            print(f"{count} conversations of {ASSEMBLE_MESSAGES:,} messages ...", flush=True)
            sides = Sides(url, settings, repository, await long_conversations(repository, count))
            with log_path.open("w") as log, serving(url, 1, log, floor=True) as floor:
                for workers in WORKERS:
                    first = workers == WORKERS[0]
                    sides.floor = (http_client(floor, key), floor.pid) if first else None
                    with serving(url, workers, log) as server:
                        http = http_client(server, key)
                        open_loops[f"http_{workers}w"] = await one_server(sides, server, http)
        problems = server_problems(log_path)
    return {
        "quick": QUICK,
        "warmup_s": WARMUP_S,
        "window_s": WINDOW_S,
        "concurrency": list(CONCURRENCY),
        "server_pool_size": SERVER_POOL,
        "assemble_messages": ASSEMBLE_MESSAGES,
        "server_log_problems": problems,
        "closed_loop": sides.results,
        "open_loop": open_loops,
        "table": table_rows(sides.results, open_loops),
    }


def server_problems(log: Path, keep: int = 5) -> dict[str, Any]:
    """How many of the server's log lines were warnings or errors, and the first few."""
    found: list[str] = []
    count = 0
    for line in log.read_text().splitlines():
        try:
            level = orjson.loads(line).get("level")
        except orjson.JSONDecodeError:
            level = "unparsed"
        if level in ("WARNING", "ERROR", "CRITICAL", "unparsed"):
            count += 1
            if len(found) < keep:
                found.append(line[:500])
    return {"count": count, "first": found}


async def open_loop_sender(http: Pool, count: int) -> Sender:
    """Request `i` appends to conversation `i % 32` (no tool calls, no expected
    version), on an idle connection of the pool or a new one."""
    per = math.ceil(count / OPEN_LOOP_CONVERSATIONS) + 1
    targets, bodies = [], []
    for k in range(OPEN_LOOP_CONVERSATIONS):
        cid, _ = await http_conversation(http)
        targets.append(path(cid, "messages"))
        raw = Script(seed=900 + k, tools=False).take(per)
        bodies.append([orjson.dumps({"messages": [m]}) for m in raw])

    async def send(i: int) -> str | None:
        k, n = i % OPEN_LOOP_CONVERSATIONS, i // OPEN_LOOP_CONVERSATIONS
        response = await http.post(targets[k], bodies[k][n])
        return None if response.status == 201 else str(response.status)

    return send


SIDE_NAMES = {
    "http_1w": "HTTP, 1 worker",
    "http_2w": "HTTP, 2 workers",
    "store": "repository, in-process",
    "store_diagnostics": "repository, in-process, diagnostics read",
    "raw": "raw psycopg INSERT+COMMIT",
    "http_floor": "HTTP, the floor app",
}


def table_rows(
    results: dict[str, dict[str, dict[str, Any]]], open_loops: dict[str, Any]
) -> list[dict[str, Any]]:
    """The rows docs/benchmarks.md shows (bench.summary renders them as they are)."""
    rows = []
    for operation, by_side in results.items():
        for clients in CONCURRENCY:
            for side in ("http_1w", "http_2w", FLOOR_SIDE, "store", "store_diagnostics", "raw"):
                entry = by_side.get(side, {}).get(str(clients))
                if entry is None:
                    continue
                rows.append(_row(operation, SIDE_NAMES[side], f"{clients} closed", entry))
    for side, entry in open_loops.items():
        rows.append(
            _row("append", SIDE_NAMES[side], f"open, {entry['offered_per_s']:.0f}/s", entry)
        )
    return rows


def _row(operation: str, side: str, load: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "operation": operation,
        "side": side,
        "load": load,
        "requests_per_s": entry["requests_per_s"],
        "median_ms": entry["median_ms"],
        "p99_ms": entry["p99_ms"],
        "generator_cpu_per_request_us": entry["this_process_cpu_per_request_us"]
        if side.startswith("HTTP")
        else None,
        "generator_cores": entry["this_process_cores"] if side.startswith("HTTP") else None,
        "server_cores": entry.get("server_cores"),
        "machine_busy_cores": entry["machine_busy_cores"],
        "errors": sum(entry["errors"].values()) + entry.get("skipped", 0),
    }


# Each row against its baseline: (what, the HTTP side, the baseline's side,
# the figure compared, its unit, the baseline's name).
IN_PROCESS, RAW = "repository in-process", "raw psycopg INSERT+COMMIT"
FLOOR_NAME = "the floor app, 1 worker"
COMPARED_ROWS = (
    ("append", "1 worker (median)", "http_1w", "store", "median_ms", "ms", IN_PROCESS),
    ("append", "1 worker (median, vs raw)", "http_1w", "raw", "median_ms", "ms", RAW),
    (
        "append",
        "1 worker (share of in-process)",
        "http_1w",
        "store",
        "requests_per_s",
        "requests/s",
        IN_PROCESS,
    ),
    (
        "append",
        "2 workers (share of in-process)",
        "http_2w",
        "store",
        "requests_per_s",
        "requests/s",
        IN_PROCESS,
    ),
    ("append", "the floor app (median)", "http_floor", "store", "median_ms", "ms", IN_PROCESS),
    (
        "append",
        "the floor app (share of in-process)",
        "http_floor",
        "store",
        "requests_per_s",
        "requests/s",
        IN_PROCESS,
    ),
    (
        "append",
        "1 worker vs the floor app (median)",
        "http_1w",
        "http_floor",
        "median_ms",
        "ms",
        FLOOR_NAME,
    ),
    ("assemble", "1 worker (median)", "http_1w", "store", "median_ms", "ms", IN_PROCESS),
    (
        "assemble",
        "1 worker (median, vs diagnostics read)",
        "http_1w",
        "store_diagnostics",
        "median_ms",
        "ms",
        IN_PROCESS + ", diagnostics read",
    ),
)
# The service's goals against the library it wraps, on the same cores with
# the load generator: a request costs at most 1.3 times the call, and 32
# clients get at least 0.6 of the in-process throughput at the best worker count.
GOALS: dict[tuple[int, str, str], tuple[str, float]] = {
    (1, "append", "1 worker (median)"): ("<=", 1.3),
    (1, "assemble", "1 worker (median)"): ("<=", 1.3),
}
BEST_WORKERS_GOAL = (32, (">=", 0.6))
OPERATION_NAMES = {
    "append": "HTTP append, {who}",
    "assemble": "HTTP payload build, 1k messages, {who}",
}


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    closed = figures["closed_loop"]
    rows = []
    for clients in CONCURRENCY:
        c = str(clients)
        who = f"{clients} client{'s' if clients > 1 else ''}"
        rows += [
            comparison(
                f"{OPERATION_NAMES[operation].format(who=who)}, {label}",
                closed[operation][side][c][figure],
                closed[operation][baseline][c][figure],
                unit=unit,
                baseline_name=name,
                goal=GOALS.get((clients, operation, label)),
            )
            for operation, label, side, baseline, figure, unit, name in COMPARED_ROWS
        ]
    clients, goal = BEST_WORKERS_GOAL
    append, c = closed["append"], str(clients)
    best = max(append[side][c]["requests_per_s"] for side in ("http_1w", "http_2w"))
    rows.append(
        comparison(
            f"HTTP append, {clients} clients, best worker count (share of in-process)",
            best,
            append["store"][c]["requests_per_s"],
            unit="requests/s",
            baseline_name=IN_PROCESS,
            goal=goal,
        )
    )
    return rows


def main() -> None:
    figures = run_and_show(
        "http_load",
        run,
        comparisons,
        title="HTTP API vs in-process and raw psycopg",
        notes=__doc__ or "",
    )
    print_table(
        "HTTP load (closed: N clients, one request in flight each)",
        ["op", "side", "load", "req/s", "median ms", "p99 ms", "gen µs/req", "errors"],
        [
            [
                r["operation"],
                r["side"],
                r["load"],
                r["requests_per_s"],
                r["median_ms"],
                r["p99_ms"],
                r["generator_cpu_per_request_us"] or "—",
                r["errors"],
            ]
            for r in figures["table"]
        ],
    )


if __name__ == "__main__":
    main()
