"""The append path users call, against the least the same server can do.

Everything goes through the store's public repository (`bench.harness.
open_repository`: the object `POST /conversations/{id}/messages` calls, minus
HTTP), never through internals. Each baseline is plain psycopg on its own
connection(s), in the same process and the same asyncio event loop, against
the same server in the same run, storing the same JSON (see bench.workload)
in a plain table `baseline.messages (id bigserial PRIMARY KEY,
conversation_id uuid, data jsonb)` in its own schema.

- single append: `append_messages(cid, [message], expected_version=v)` with
  `v` the version the previous append returned, vs the physical limit: one
  `INSERT` in autocommit on a blocking psycopg connection (one round trip,
  one commit, no event loop: the fastest client PostgreSQL has, and what
  bare-table stores send). For information: an autocommit INSERT on an async
  connection, and `INSERT` + `COMMIT` (psycopg's default transaction
  handling: BEGIN, INSERT, COMMIT) on an async and a blocking connection.
  All take turns within every repetition after a warm-up; medians. Then
  CPU per append, the store against the blocking autocommit INSERT in
  turns of 100: this process's, and the server processes' of the
  connections to the database (from /proc, where the server runs on this
  machine), which other work on the machine does not count in.
- 100-message append: one `append_messages` call of 100 messages (user and
  assistant turns, a tool call and its result every 5th turn) vs `COPY` of the
  same 100 rows + COMMIT into a copy of the baseline table with the store's
  words search index (the same tokenizer over the same text, the same 64 kB
  pending list), vs `COPY` into the plain table, and vs one multi-row
  `INSERT` + COMMIT; interleaved, medians. The goal (≤ 3×) is held like for
  like: the store with its default words index against the `COPY` that keeps
  the same text searchable. Tokenizing alone makes PostgreSQL's own `COPY`
  several times slower (an info row), so no store whose text is searchable by index
  can come within 3× of a plain `COPY` (docs/search.md, "What an append
  pays for search"); the store without the index against the plain `COPY`
  is an info row.
- throughput: 1, 8 and 32 concurrent writers, each on its own conversation
  (no lock contention between them), each making the same fixed number of
  single-message appends, vs the fastest raw client: one psycopg connection
  per writer, each an autocommit INSERT loop, either blocking connections in
  as many threads or async connections as tasks of this event loop; the goal
  is held against whichever is faster in the same run (at each writer
  count). For information: async connections doing INSERT + COMMIT. The
  store's writers are tasks of this one event loop; every side is one Python
  process on the same cores as the server. Connections are opened (and the
  store's pool filled) by a warm-up round; each round the sides take turns,
  their order rotating; medians of appends/s. Share = store/raw. CPU per
  append: this process's, the whole machine's, and the server processes'
  of the connections to the database (from /proc, where the server runs on
  this machine: what the server spent whatever else the machine runs).
- storage: 5,000 single appends (2,000 in a quick run: the figure is per
  message) to one conversation in a fresh database; the store's size is the
  growth of every table in the `public` schema (`pg_total_relation_size`:
  heap, TOAST, indexes, free-space and visibility maps, table by table in
  `store_growth_by_table`, each index in `store_growth_by_index`), measured
  after `VACUUM (ANALYZE)` before and after; the baseline's is its table's
  size (primary key only, no index on the conversation) after as many
  INSERT + COMMITs of the same JSON and VACUUM. Dead row versions the store
  leaves behind (e.g. the conversation's head row, updated by every append)
  count: after VACUUM their space is reusable but still occupied.
- without the words index (info rows): the same single and 100-message appends
  interleaved with the others, into a second database of the same
  server where `convo search-index disable text` was run, and the storage
  run repeated there: what a store that opted out of the default search
  index pays (docs/search.md, "What an append pays for search").
- where a 100-message append's time goes (`bulk.split`): after the timed
  calls, more of them timed alone, this process's CPU per call against the
  rest of the wall time (the server's statement and commit, and the wire).
- profile: cProfile of single appends through the repository, top 20 by
  cumulative time and by own time, in `profile`.

The store is handed `Message` objects (what the route gets from FastAPI's
body parsing) and the baseline JSON text, both built before the clock
starts: HTTP and body parsing are outside both figures.

No figure is asserted; goals are compared in `comparisons`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
import uuid
from typing import Any

import psycopg

from bench.harness import (
    SEQUENTIAL_POOL,
    bench_database,
    machine_cpu_seconds,
    median_ms,
    open_repository,
    profile_calls,
    quick_mode,
    raw_async_connection,
    raw_sync_connection,
    run_and_show,
    time_interleaved,
    vacuum,
)
from bench.report import Compared, compared, comparison, print_table
from bench.workload import RAW_TABLE, Script, as_json, as_messages, raw_table_ddl
from hosting.settings import Settings
from store.domain.messages import Message
from store.postgres import search_indexes
from store.repository import Repository

QUICK = quick_mode()
SINGLE_REPEATS = 300 if QUICK else 1_000
SINGLE_WARMUP = 30 if QUICK else 50
BULK = 100
BULK_REPEATS = 20 if QUICK else 60
BULK_WARMUP = 3 if QUICK else 5
BULK_SPLIT_CALLS = 10 if QUICK else 30  # after the timed ones: client CPU vs the rest
WRITERS = (1, 8, 32)
PER_WRITER = 50 if QUICK else 200
ROUNDS = 3
THROUGHPUT_WARMUP = 10  # appends per writer, 32 writers, the store
RAW_WARMUP = 5  # untimed inserts per raw connection, opened for its measurement
# The goal's size; quick runs fewer (bytes per message barely depends on it).
STORAGE_APPENDS = 2_000 if QUICK else 5_000
PROFILE_APPENDS = 100 if QUICK else 300
SINGLE_CPU_APPENDS = 500 if QUICK else 2_000  # each side, in turns of CPU_TURN
CPU_TURN = 100
POOL_SIZE = max(WRITERS) + 2

INSERT = f"INSERT INTO {RAW_TABLE} (conversation_id, data) VALUES (%s, %s)"
COPY = f"COPY {RAW_TABLE} (conversation_id, data) FROM STDIN"
# The baseline's table again, with the store's words search index over the
# message's text (the same tokenizer, the same short pending list): what a
# bulk write costs any table that keeps its text searchable by index.
SEARCHABLE_TABLE = f"{RAW_TABLE}_searchable"
SEARCHABLE_DDL = [
    f"CREATE TABLE {SEARCHABLE_TABLE} (LIKE {RAW_TABLE} INCLUDING ALL)",
    f"CREATE INDEX ON {SEARCHABLE_TABLE} USING gin"
    " (to_tsvector('simple'::regconfig, data ->> 'content'))"
    f" {search_indexes.PENDING_LIST}",
]
COPY_SEARCHABLE = f"COPY {SEARCHABLE_TABLE} (conversation_id, data) FROM STDIN"
MULTI_INSERT = f"INSERT INTO {RAW_TABLE} (conversation_id, data) VALUES " + ", ".join(
    ["(%s, %s)"] * BULK
)

GOAL_SINGLE = 1.5
GOAL_BULK_COPY = 3.0
GOAL_SHARE_32 = 0.70
GOAL_SHARE_8 = 0.60
GOAL_32_VS_8 = 1.0
GOAL_STORAGE = 2.0
ASYNC_INSERT = "async psycopg INSERT+COMMIT"
SYNC_AUTOCOMMIT = "blocking psycopg autocommit INSERT"
BULK_COPY = f"COPY {BULK} rows+COMMIT"
PLAIN_TABLE = "plain jsonb table"


class Stream:
    """One conversation appended to through the repository, its version tracked
    as a client would (the version the last append returned)."""

    def __init__(self, repository: Repository, conversation_id: str, version: int) -> None:
        self.repository = repository
        self.id = conversation_id
        self.version = version

    @classmethod
    async def create(cls, repository: Repository) -> Stream:
        conversation = await repository.create_conversation(metadata={"bench": "write_path"})
        return cls(repository, conversation.id, conversation.version)

    async def append(self, messages: list[Message]) -> None:
        appended = await self.repository.append_messages(
            self.id, messages, expected_version=self.version
        )
        self.version = appended.version


async def raw_insert(conn: psycopg.AsyncConnection[Any], cid: uuid.UUID, data: str) -> None:
    await conn.execute(INSERT, (cid, data))
    await conn.commit()


def setup_raw_table(url: str, settings: Settings) -> None:
    with raw_sync_connection(url, settings) as conn:
        for statement in raw_table_ddl(conversation_index=False):
            conn.execute(statement)
        conn.commit()


# --- single and 100-message appends -----------------------------------------------


def drop_text_index(url: str, settings: Settings) -> None:
    """`convo search-index disable text` on this database (for the info rows:
    what a store that opted out of the words index pays)."""
    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        search_indexes.disable(conn, "text")


async def single_append(
    repository: Repository, unindexed: Repository, url: str, settings: Settings
) -> dict[str, Any]:
    stream = await Stream.create(repository)
    plain = await Stream.create(unindexed)
    raw = Script(seed=1, tools=False).take(SINGLE_WARMUP + SINGLE_REPEATS)
    messages, texts = as_messages(raw), as_json(raw)
    raw_cid, sync_cid, auto_cid, sync_auto_cid = (uuid.uuid4() for _ in range(4))
    conn = await raw_async_connection(url, settings)
    auto_conn = await raw_async_connection(url, settings)
    await auto_conn.set_autocommit(True)
    sync_conn = raw_sync_connection(url, settings)
    sync_auto_conn = raw_sync_connection(url, settings)
    sync_auto_conn.autocommit = True
    try:

        async def store(i: int) -> None:
            await stream.append([messages[i]])

        async def store_unindexed(i: int) -> None:
            await plain.append([messages[i]])

        async def raw_async(i: int) -> None:
            await raw_insert(conn, raw_cid, texts[i])

        async def raw_sync(i: int) -> None:
            sync_conn.execute(INSERT, (sync_cid, texts[i]))
            sync_conn.commit()

        async def raw_autocommit(i: int) -> None:
            await auto_conn.execute(INSERT, (auto_cid, texts[i]))

        async def raw_sync_autocommit(i: int) -> None:
            sync_auto_conn.execute(INSERT, (sync_auto_cid, texts[i]))

        samples = await time_interleaved(
            {
                "store": store,
                "store_unindexed": store_unindexed,
                "raw": raw_async,
                "raw_sync": raw_sync,
                "raw_autocommit": raw_autocommit,
                "raw_sync_autocommit": raw_sync_autocommit,
            },
            SINGLE_REPEATS,
            SINGLE_WARMUP,
        )
    finally:
        await conn.close()
        await auto_conn.close()
        sync_conn.close()
        sync_auto_conn.close()
    return {
        "repeats": SINGLE_REPEATS,
        "warmup": SINGLE_WARMUP,
        "message_chars_median": sorted(len(t) for t in texts)[len(texts) // 2],
        "store_median_ms": median_ms(samples["store"]),
        "store_without_text_index_median_ms": median_ms(samples["store_unindexed"]),
        "raw_insert_commit_median_ms": median_ms(samples["raw"]),
        "raw_sync_insert_commit_median_ms": median_ms(samples["raw_sync"]),
        "raw_autocommit_insert_median_ms": median_ms(samples["raw_autocommit"]),
        "raw_sync_autocommit_insert_median_ms": median_ms(samples["raw_sync_autocommit"]),
    }


async def single_cpu(repository: Repository, url: str, settings: Settings) -> dict[str, Any]:
    """CPU per single append, this process's and the server processes' of
    this database's connections (`Measured`), the store against a blocking
    autocommit INSERT, in turns of CPU_TURN: what an append costs whatever
    else the machine runs (docs/storage.md, "Where an append's time goes")."""
    stream = await Stream.create(repository)
    raw = Script(seed=5, tools=False).take(SINGLE_CPU_APPENDS)
    messages, texts = as_messages(raw), as_json(raw)
    cid = uuid.uuid4()
    totals = {"store": [0.0, 0.0], "raw_sync_autocommit": [0.0, 0.0]}
    with raw_sync_connection(url, settings) as conn:
        conn.autocommit = True
        for start in range(0, SINGLE_CPU_APPENDS, CPU_TURN):
            turn = range(start, min(start + CPU_TURN, SINGLE_CPU_APPENDS))
            measured = Measured(backend_pids(url, settings))
            for i in turn:
                await stream.append([messages[i]])
            _, process, _, server = measured.stop(len(turn))
            totals["store"][0] += process
            totals["store"][1] += server or 0.0
            measured = Measured(backend_pids(url, settings))
            for i in turn:
                conn.execute(INSERT, (cid, texts[i]))
            _, process, _, server = measured.stop(len(turn))
            totals["raw_sync_autocommit"][0] += process
            totals["raw_sync_autocommit"][1] += server or 0.0
    return {
        side: {
            "client_process_us": 1e6 * process / SINGLE_CPU_APPENDS,
            "server_backends_us": 1e6 * server / SINGLE_CPU_APPENDS,
        }
        for side, (process, server) in totals.items()
    }


async def bulk_append(
    repository: Repository, unindexed: Repository, url: str, settings: Settings
) -> dict[str, Any]:
    stream = await Stream.create(repository)
    plain = await Stream.create(unindexed)
    script = Script(seed=2, tools=True, prefix="bulk")
    calls = BULK_WARMUP + BULK_REPEATS + BULK_SPLIT_CALLS
    raws = [script.take(BULK) for _ in range(calls)]
    messages = [as_messages(r) for r in raws]
    texts = [as_json(r) for r in raws]
    copy_cid, insert_cid = uuid.uuid4(), uuid.uuid4()
    conn = await raw_async_connection(url, settings)
    for statement in SEARCHABLE_DDL:
        await conn.execute(statement)
    await conn.commit()
    try:

        async def store(i: int) -> None:
            await stream.append(messages[i])

        async def store_unindexed(i: int) -> None:
            await plain.append(messages[i])

        async def copy_into(statement: str, i: int) -> None:
            async with conn.cursor() as cursor, cursor.copy(statement) as copy:
                for data in texts[i]:
                    await copy.write_row((copy_cid, data))
            await conn.commit()

        async def raw_copy(i: int) -> None:
            await copy_into(COPY, i)

        async def raw_copy_searchable(i: int) -> None:
            await copy_into(COPY_SEARCHABLE, i)

        async def raw_multi_insert(i: int) -> None:
            params: list[object] = []
            for data in texts[i]:
                params += (insert_cid, data)
            await conn.execute(MULTI_INSERT, params)
            await conn.commit()

        samples = await time_interleaved(
            {
                "store": store,
                "store_unindexed": store_unindexed,
                "copy": raw_copy,
                "copy_searchable": raw_copy_searchable,
                "insert": raw_multi_insert,
            },
            BULK_REPEATS,
            BULK_WARMUP,
        )
        split = {
            "store": await client_split(stream, messages[-BULK_SPLIT_CALLS:]),
            "store_without_text_index": await client_split(plain, messages[-BULK_SPLIT_CALLS:]),
        }
    finally:
        await conn.close()
    store_ms = median_ms(samples["store"])
    return {
        "split": split,
        "messages_per_call": BULK,
        "repeats": BULK_REPEATS,
        "warmup": BULK_WARMUP,
        "store_median_ms": store_ms,
        "store_ms_per_message": store_ms / BULK,
        "store_without_text_index_median_ms": median_ms(samples["store_unindexed"]),
        "raw_copy_commit_median_ms": median_ms(samples["copy"]),
        "raw_copy_searchable_commit_median_ms": median_ms(samples["copy_searchable"]),
        "raw_multi_insert_commit_median_ms": median_ms(samples["insert"]),
    }


async def client_split(stream: Stream, batches: list[list[Message]]) -> dict[str, float]:
    """Where a bulk append's time goes: this process's CPU time per call (the
    repository's Python: validation, decisions, encoding, the driver) and the
    rest of the wall time (the server's statement and commit, and the wire);
    medians of per-call figures."""
    cpu: list[float] = []
    wall: list[float] = []
    for batch in batches:
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        await stream.append(batch)
        wall.append(time.perf_counter() - wall_before)
        cpu.append(time.process_time() - cpu_before)
    return {
        "calls": len(batches),
        "wall_median_ms": median_ms(wall),
        "client_cpu_median_ms": median_ms(cpu),
        "server_and_wire_median_ms": median_ms([w - c for w, c in zip(wall, cpu, strict=True)]),
    }


# --- throughput -----------------------------------------------------------------------


# The sides of the throughput run: the store, and the raw clients it is held
# against (the fastest of `FASTEST_RAW` at each writer count is the goal's).
Rate = tuple[float, float, float | None, float | None]
SIDES = ("store", "raw_threads", "raw_async_autocommit", "raw")
FASTEST_RAW = ("raw_threads", "raw_async_autocommit")
RAW_CLIENTS = {
    "raw_threads": "threads, blocking psycopg autocommit INSERT",
    "raw_async_autocommit": "async psycopg conn. autocommit INSERT",
}


BACKENDS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
)


def backend_pids(url: str, settings: Settings) -> list[int]:
    """The server processes of every connection to this database now: the
    store's pool, and the raw side's connections while they are open."""
    with raw_sync_connection(url, settings) as conn:
        return [row[0] for row in conn.execute(BACKENDS).fetchall()]


def backends_cpu_seconds(pids: list[int]) -> float | None:
    """CPU time (user + system) the server processes `pids` spent so far,
    from /proc; None where they cannot be read (a server on another
    machine). A process gone meanwhile counts as nothing."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        except OSError:
            return None
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


class Measured:
    """A timed section's wall seconds, this process's CPU seconds, the
    whole machine's and the server processes' `pids` (None where unknown):
    the server's CPU per append whatever else the machine runs."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.server = backends_cpu_seconds(pids)
        self.machine = machine_cpu_seconds()
        self.process = time.process_time()
        self.wall = time.perf_counter()

    def stop(self, appends: int) -> Rate:
        """Appends per second, and the section's CPU seconds (this process,
        the machine, the server's processes)."""
        wall = time.perf_counter() - self.wall
        process = time.process_time() - self.process
        machine_now, server_now = machine_cpu_seconds(), backends_cpu_seconds(self.pids)
        return (
            appends / wall,
            process,
            None if self.machine is None or machine_now is None else machine_now - self.machine,
            None if self.server is None or server_now is None else server_now - self.server,
        )


class Writers:
    """`max(WRITERS)` store conversations, and raw connections opened for
    each raw measurement (the server's connection limit is shared: the
    store's pool and one kind of raw connections at a time). Writer `k`
    writes the same messages on every side, every round."""

    def __init__(self, streams: list[Stream], url: str, settings: Settings) -> None:
        self.streams = streams
        self.url = url
        self.settings = settings
        self.raw_ids = [uuid.uuid4() for _ in streams]

    def prepare(self, writers: int, per_writer: int) -> list[list[dict[str, Any]]]:
        return [Script(seed=100 + k, tools=False).take(per_writer) for k in range(writers)]

    async def side(self, name: str, writers: int, per_writer: int) -> Rate:
        """Appends per second on side `name`, `writers` concurrent writers,
        and the CPU its timed part took (`Measured.stop`)."""
        if name == "store":
            return await self.store(writers, per_writer)
        if name == "raw_threads":
            return await self.raw_threads(writers, per_writer)
        batches = [as_json(raw) for raw in self.prepare(writers, per_writer)]
        autocommit = name == "raw_async_autocommit"
        conns = [await raw_async_connection(self.url, self.settings) for _ in range(writers)]
        try:
            for k, conn in enumerate(conns):
                await conn.set_autocommit(autocommit)
                for data in batches[k][:RAW_WARMUP]:  # the backend's caches warm
                    await raw_insert(conn, self.raw_ids[k], data)

            async def writer(k: int) -> None:
                conn, cid = conns[k], self.raw_ids[k]
                for data in batches[k]:
                    if autocommit:
                        await conn.execute(INSERT, (cid, data))
                    else:
                        await raw_insert(conn, cid, data)

            measured = Measured(backend_pids(self.url, self.settings))
            await asyncio.gather(*(writer(k) for k in range(writers)))
            return measured.stop(writers * per_writer)
        finally:
            for conn in conns:
                await conn.close()

    async def store(self, writers: int, per_writer: int) -> Rate:
        batches = [as_messages(raw) for raw in self.prepare(writers, per_writer)]

        async def writer(k: int) -> None:
            for message in batches[k]:
                await self.streams[k].append([message])

        measured = Measured(backend_pids(self.url, self.settings))
        await asyncio.gather(*(writer(k) for k in range(writers)))
        return measured.stop(writers * per_writer)

    async def raw_threads(self, writers: int, per_writer: int) -> Rate:
        """Blocking autocommit INSERTs, one thread and connection per writer,
        all started together. The connections are opened before and closed
        after the measurement (their server processes' CPU is read at its end)."""
        batches = [as_json(raw) for raw in self.prepare(writers, per_writer)]
        conns = [raw_sync_connection(self.url, self.settings) for _ in range(writers)]
        try:
            for k, conn in enumerate(conns):
                conn.autocommit = True
                for data in batches[k][:RAW_WARMUP]:  # the backend's caches warm
                    conn.execute(INSERT, (self.raw_ids[k], data))
            start = threading.Barrier(writers + 1, timeout=60)

            def writer(k: int) -> None:
                conn, cid = conns[k], self.raw_ids[k]
                start.wait()
                for data in batches[k]:
                    conn.execute(INSERT, (cid, data))

            def run_all() -> Rate:
                threads = [threading.Thread(target=writer, args=(k,)) for k in range(writers)]
                for thread in threads:
                    thread.start()
                measured = Measured(backend_pids(self.url, self.settings))
                start.wait()
                for thread in threads:
                    thread.join()
                return measured.stop(writers * per_writer)

            return await asyncio.to_thread(run_all)
        finally:
            for conn in conns:
                conn.close()


async def throughput(repository: Repository, url: str, settings: Settings) -> dict[str, Any]:
    most = max(WRITERS)
    streams = [await Stream.create(repository) for _ in range(most)]
    writers = Writers(streams, url, settings)
    await writers.store(most, THROUGHPUT_WARMUP)  # fills the store's pool: `most` connections
    samples: dict[str, dict[int, list[float]]] = {side: {n: [] for n in WRITERS} for side in SIDES}
    # CPU seconds per side and writer count: (this process, whole machine,
    # the server's processes of this database).
    cpu: dict[str, dict[int, list[float]]] = {
        side: {n: [0.0, 0.0, 0.0] for n in WRITERS} for side in SIDES
    }
    for round_number in range(ROUNDS):
        for n in WRITERS:
            shift = round_number % len(SIDES)
            for side in SIDES[shift:] + SIDES[:shift]:
                rate, process, machine, server = await writers.side(side, n, PER_WRITER)
                samples[side][n].append(rate)
                cpu[side][n][0] += process
                cpu[side][n][1] += machine or 0.0
                cpu[side][n][2] += server or 0.0

    by_writers = {}
    for n in WRITERS:
        appends = ROUNDS * n * PER_WRITER
        rates = {side: statistics.median(samples[side][n]) for side in SIDES}
        fastest = max(FASTEST_RAW, key=lambda side: rates[side])
        by_writers[str(n)] = {
            "store_appends_per_s": rates["store"],
            # The goal's baseline: the faster raw client of this run.
            "fastest_raw": fastest,
            "fastest_raw_appends_per_s": rates[fastest],
            "share_of_fastest_raw": rates["store"] / rates[fastest],
            "raw_threads_autocommit_appends_per_s": rates["raw_threads"],
            "raw_async_autocommit_appends_per_s": rates["raw_async_autocommit"],
            "raw_appends_per_s": rates["raw"],
            "share_of_raw": rates["store"] / rates["raw"],
            "samples": {side: samples[side][n] for side in SIDES},
            # Where a writer count saturates the cores, the share of raw is
            # about raw's CPU per append over the store's.
            "cpu_ms_per_append": {
                side: {
                    "client_process": 1000 * cpu[side][n][0] / appends,
                    "machine": 1000 * cpu[side][n][1] / appends,
                    "server_backends": 1000 * cpu[side][n][2] / appends,
                }
                for side in SIDES
            },
        }
    return {
        "appends_per_writer": PER_WRITER,
        "rounds": ROUNDS,
        "pool_size": POOL_SIZE,
        "writers": by_writers,
    }


# --- storage -----------------------------------------------------------------------------

SIZES = """
SELECT n.nspname, c.relname,
       pg_table_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm') AND n.nspname = %s
ORDER BY c.relname
"""


INDEX_SIZES = """
SELECT c.relname, pg_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'i' AND n.nspname = %s
ORDER BY c.relname
"""


def index_sizes(url: str, settings: Settings, schema: str) -> dict[str, int]:
    """Bytes per index of `schema`."""
    with raw_sync_connection(url, settings) as conn:
        return {name: size for name, size in conn.execute(INDEX_SIZES, (schema,)).fetchall()}


def table_sizes(url: str, settings: Settings, schema: str) -> dict[str, dict[str, int]]:
    """Bytes per table of `schema`: heap + TOAST + maps, indexes, total."""
    with raw_sync_connection(url, settings) as conn:
        rows = conn.execute(SIZES, (schema,)).fetchall()
    return {
        name: {"table_and_toast": table, "indexes": indexes, "total": total}
        for _, name, table, indexes, total in rows
    }


async def storage(settings: Settings, *, text_index: bool = True) -> dict[str, Any]:
    raw = Script(seed=3, tools=True, prefix="st").take(STORAGE_APPENDS)
    messages, texts = as_messages(raw), as_json(raw)
    with bench_database(settings) as url:
        setup_raw_table(url, settings)
        if not text_index:
            drop_text_index(url, settings)
        async with open_repository(
            url, settings, pool_size=SEQUENTIAL_POOL, min_size=1
        ) as repository:
            stream = await Stream.create(repository)
            vacuum(url, settings)
            before = table_sizes(url, settings, "public")
            indexes_before = index_sizes(url, settings, "public")
            started = time.perf_counter()
            for message in messages:
                await stream.append([message])
            store_seconds = time.perf_counter() - started
        conn = await raw_async_connection(url, settings)
        try:
            raw_cid = uuid.uuid4()
            started = time.perf_counter()
            for data in texts:
                await raw_insert(conn, raw_cid, data)
            raw_seconds = time.perf_counter() - started
        finally:
            await conn.close()
        vacuum(url, settings)
        after = table_sizes(url, settings, "public")
        indexes_after = index_sizes(url, settings, "public")
        baseline = table_sizes(url, settings, "baseline")["messages"]
    growth = {
        name: {
            part: sizes[part] - before.get(name, {}).get(part, 0)
            for part in ("table_and_toast", "indexes", "total")
        }
        for name, sizes in after.items()
    }
    store_bytes = sum(g["total"] for g in growth.values())
    return {
        "appends": STORAGE_APPENDS,
        "json_chars_total": sum(len(t) for t in texts),
        "store_bytes_per_message": store_bytes / STORAGE_APPENDS,
        "raw_bytes_per_message": baseline["total"] / STORAGE_APPENDS,
        "store_growth_by_table": {n: g for n, g in growth.items() if g["total"]},
        "store_growth_by_index": {
            name: grown
            for name, size in indexes_after.items()
            if (grown := size - indexes_before.get(name, 0))
        },
        "raw_table": baseline,
        "store_sequential_appends_per_s": STORAGE_APPENDS / store_seconds,
        "raw_sequential_appends_per_s": STORAGE_APPENDS / raw_seconds,
    }


# --- the run --------------------------------------------------------------------------------


async def run(url: str, settings: Settings) -> dict[str, Any]:
    setup_raw_table(url, settings)
    with bench_database(settings) as unindexed_url:
        drop_text_index(unindexed_url, settings)
        async with (
            open_repository(url, settings, pool_size=SEQUENTIAL_POOL, min_size=1) as repository,
            open_repository(
                unindexed_url, settings, pool_size=SEQUENTIAL_POOL, min_size=1
            ) as unindexed,
        ):
            print("single-message appends ...", flush=True)
            single = await single_append(repository, unindexed, url, settings)
            single["cpu_per_append"] = await single_cpu(repository, url, settings)
            print("100-message appends ...", flush=True)
            bulk = await bulk_append(repository, unindexed, url, settings)
    async with open_repository(url, settings, pool_size=POOL_SIZE) as repository:
        print("throughput ...", flush=True)
        rates = await throughput(repository, url, settings)
        print("profile ...", flush=True)
        stream = await Stream.create(repository)
        raw = Script(seed=4, tools=False).take(PROFILE_APPENDS)
        messages = as_messages(raw)

        async def append(i: int) -> None:
            await stream.append([messages[i]])

        cumulative, own = await profile_calls(append, PROFILE_APPENDS)
    print("storage ...", flush=True)
    sizes = await storage(settings)
    sizes_unindexed = await storage(settings, text_index=False)
    return {
        "quick": QUICK,
        "single": single,
        "bulk": bulk,
        "throughput": rates,
        "storage": sizes,
        "storage_without_text_index": sizes_unindexed,
        "profile": {"single_append_cumulative": cumulative, "single_append_own_time": own},
    }


# Why a goal is missed, from the same run's figures (docs/benchmarks.md shows
# these beside the rows).


def _bulk_note(bulk: dict[str, Any]) -> str:
    search = bulk["store_median_ms"] - bulk["store_without_text_index_median_ms"]
    copy_search = bulk["raw_copy_searchable_commit_median_ms"] - bulk["raw_copy_commit_median_ms"]
    return (
        f"{search:.1f} ms of it is the words search index (to_tsvector and its pending"
        f" list, merged within the call), which adds {copy_search:.1f} ms to a raw COPY"
        " of the same rows"
    )


def _single_cpu_rows(single: dict[str, Any]) -> list[Compared]:
    """Information rows: a single append's CPU, this process's and its
    server processes', against the blocking autocommit INSERT's, where the
    server's processes were read (all in microseconds, shown as ms)."""
    cpu = single.get("cpu_per_append")
    if not cpu or not cpu["raw_sync_autocommit"]["server_backends_us"]:
        return []
    store, raw = cpu["store"], cpu["raw_sync_autocommit"]
    return [
        (
            f"single-message append, CPU per append: {part} (info)",
            store[key] / 1000,
            raw[key] / 1000,
            SYNC_AUTOCOMMIT,
            None,
            "",
        )
        for part, key in (
            ("this process", "client_process_us"),
            ("its server processes", "server_backends_us"),
        )
    ]


def _cpu_per_append(side: dict[str, float]) -> tuple[float, str]:
    """A side's CPU per append, client and server: this process's and its
    server processes' where those were read (whatever else the machine
    ran), else the whole machine's."""
    server = side.get("server_backends", 0.0)
    if server > 0:
        return side["client_process"] + server, "this process and its server processes"
    return side["machine"], "the whole machine"


def _cpu_note(cpu: dict[str, dict[str, float]], baseline: str) -> str:
    (store, counted), (raw, _) = _cpu_per_append(cpu["store"]), _cpu_per_append(cpu[baseline])
    if not raw or not store:
        return ""
    spent = (
        f"{store:.2f} ms of CPU per append ({counted}) against raw's {raw:.2f}; this process"
        f" {cpu['store']['client_process']:.2f} against {cpu[baseline]['client_process']:.2f}"
    )
    if store > raw:
        return f"CPU-bound: {spent}: on these cores the share cannot pass about {raw / store:.2f}"
    # Appends that wait share a statement (docs/storage.md, "Writers
    # together"): less CPU each than a raw INSERT, so what is left is waiting.
    return (
        f"{spent}: appends written together cost less CPU than raw's; the rest of the gap"
        " is each statement's wait for its commit"
    )


def _storage_note(sizes: dict[str, Any]) -> str:
    growth: dict[str, dict[str, int]] = sizes["store_growth_by_table"]
    n: int = sizes["appends"]

    def per_message(*names: str) -> float:
        return sum(g["total"] for t, g in growth.items() if t.startswith(names)) / n

    indexes: dict[str, int] = sizes.get("store_growth_by_index", {})

    def index(*names: str) -> float:
        return sum(size for name, size in indexes.items() if name.startswith(names)) / n

    events = growth.get("events", {"table_and_toast": 0, "indexes": 0})
    messages = growth.get("messages", {"table_and_toast": 0, "indexes": 0})
    return (
        f"a message: its event {events['table_and_toast'] / n:.0f} B (the log; the body is"
        f" stored only there), the events' indexes {events['indexes'] / n:.0f} B (the words"
        f" search index {index('ix_events_search'):.0f}), its row of messages"
        f" {messages['table_and_toast'] / n:.0f} B and that row's indexes"
        f" {messages['indexes'] / n:.0f} B (the key {index('pk_messages'):.0f}, the batch's"
        f" arrivals {index('ix_messages_batch'):.0f}, its role's look-ups"
        f" {index('uq_messages_role_'):.0f}), members carried by batch operations"
        f" {per_message('batch_carried'):.0f} B, tool calls {per_message('tool_calls'):.0f} B"
    )


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    single, bulk = figures["single"], figures["bulk"]
    writers = figures["throughput"]["writers"]
    sizes = figures["storage"]
    # Each timed append's median against a baseline's, in milliseconds.
    timed: list[Compared] = [
        (
            "single-message append vs the fastest raw single-row insert (median)",
            single["store_median_ms"],
            single["raw_sync_autocommit_insert_median_ms"],
            SYNC_AUTOCOMMIT,
            ("<=", GOAL_SINGLE),
            "",
        ),
        *_single_cpu_rows(single),
        (
            "single-message append vs async INSERT+COMMIT (info)",
            single["store_median_ms"],
            single["raw_insert_commit_median_ms"],
            ASYNC_INSERT,
            None,
            "",
        ),
        (
            "single-message append, text search index dropped (info)",
            single["store_without_text_index_median_ms"],
            single["raw_sync_autocommit_insert_median_ms"],
            SYNC_AUTOCOMMIT,
            None,
            "",
        ),
        (
            "single-message append vs blocking psycopg INSERT+COMMIT (info)",
            single["store_median_ms"],
            single["raw_sync_insert_commit_median_ms"],
            "blocking psycopg INSERT+COMMIT",
            None,
            "",
        ),
        (
            "single-message append vs async autocommit INSERT (info)",
            single["store_median_ms"],
            single["raw_autocommit_insert_median_ms"],
            "async psycopg autocommit INSERT",
            None,
            "",
        ),
        # The goal is held like for like (docs/search.md, "What an append
        # pays for search"): the store keeps every message's text searchable
        # by index, and that index alone makes PostgreSQL's own COPY about 4x
        # slower (an info row below), so the least a searchable store can do
        # is a COPY into a table with the same index.
        (
            f"{BULK}-message append, one call, vs COPY into a table with the same"
            " words index (median)",
            bulk["store_median_ms"],
            bulk["raw_copy_searchable_commit_median_ms"],
            f"COPY {BULK} rows+COMMIT, words index",
            ("<=", GOAL_BULK_COPY),
            "",
        ),
        (
            f"{BULK}-message append, text search index dropped (info)",
            bulk["store_without_text_index_median_ms"],
            bulk["raw_copy_commit_median_ms"],
            BULK_COPY,
            None,
            "",
        ),
        (
            f"{BULK}-message append vs COPY into a table without the words index (info)",
            bulk["store_median_ms"],
            bulk["raw_copy_commit_median_ms"],
            BULK_COPY,
            None,
            _bulk_note(bulk),
        ),
        (
            f"COPY of {BULK} rows into a table with the words index vs without it"
            " (info: what the index costs PostgreSQL itself)",
            bulk["raw_copy_searchable_commit_median_ms"],
            bulk["raw_copy_commit_median_ms"],
            BULK_COPY,
            None,
            "",
        ),
        (
            f"{BULK}-message append vs multi-row INSERT (info)",
            bulk["store_median_ms"],
            bulk["raw_multi_insert_commit_median_ms"],
            f"INSERT {BULK} rows+COMMIT",
            None,
            "",
        ),
    ]
    rows = compared(timed, unit="ms")
    share_goals = {max(WRITERS): GOAL_SHARE_32, 8: GOAL_SHARE_8}
    for n in WRITERS:
        w = writers[str(n)]
        plural = "s" if n > 1 else ""
        goal = share_goals.get(n)
        fastest = w["fastest_raw"]
        baselines = [
            (
                "(share of the fastest raw client)",
                w["fastest_raw_appends_per_s"],
                RAW_CLIENTS[fastest],
                None if goal is None else (">=", goal),
                _cpu_note(w["cpu_ms_per_append"], fastest) if goal else "",
            ),
            (
                "vs async INSERT+COMMIT (info)",
                w["raw_appends_per_s"],
                "async psycopg conn. INSERT+COMMIT",
                None,
                "",
            ),
        ]
        for label, baseline, client, target, note in baselines:
            rows.append(
                comparison(
                    f"throughput, {n} writer{plural} {label}",
                    w["store_appends_per_s"],
                    baseline,
                    unit="appends/s",
                    baseline_name=f"{n} {client}",
                    goal=target,
                    note=note,
                )
            )
    most = writers[str(max(WRITERS))]
    cpu = most["cpu_ms_per_append"]
    (store_cpu, counted), (raw_cpu, _) = (
        _cpu_per_append(cpu["store"]),
        _cpu_per_append(cpu[most["fastest_raw"]]),
    )
    if raw_cpu > 0:
        rows.append(
            comparison(
                f"CPU per append, client + server ({counted}), {max(WRITERS)} writers (info)",
                store_cpu,
                raw_cpu,
                unit="ms",
                baseline_name=RAW_CLIENTS[most["fastest_raw"]],
            )
        )
    rows.append(
        comparison(
            "throughput, 32 writers vs 8 writers",
            writers["32"]["store_appends_per_s"],
            writers["8"]["store_appends_per_s"],
            unit="appends/s",
            baseline_name="store, 8 writers",
            goal=(">=", GOAL_32_VS_8),
        )
    )
    # Bytes per message against the plain table's.
    storage: list[Compared] = [
        (
            f"storage per message after {STORAGE_APPENDS:,} appends",
            sizes["store_bytes_per_message"],
            sizes["raw_bytes_per_message"],
            PLAIN_TABLE,
            ("<=", GOAL_STORAGE),
            _storage_note(sizes),
        )
    ]
    plain = figures.get("storage_without_text_index")
    if plain is not None:
        storage.append(
            (
                f"storage per message after {STORAGE_APPENDS:,} appends,"
                " text search index dropped (info)",
                plain["store_bytes_per_message"],
                plain["raw_bytes_per_message"],
                PLAIN_TABLE,
                None,
                "",
            )
        )
    return rows + compared(storage, unit="bytes")


def main() -> None:
    figures = run_and_show(
        "write_path", run, comparisons, title="append path vs raw psycopg", notes=__doc__ or ""
    )
    growth = figures["storage"]["store_growth_by_table"]
    print_table(
        f"store's growth by table after {STORAGE_APPENDS:,} appends (bytes per message)",
        ["table", "heap+toast", "indexes", "total"],
        [
            [
                name,
                g["table_and_toast"] / STORAGE_APPENDS,
                g["indexes"] / STORAGE_APPENDS,
                g["total"] / STORAGE_APPENDS,
            ]
            for name, g in sorted(growth.items(), key=lambda item: -item[1]["total"])
        ],
    )
    print("profile of single appends (top 20 by cumulative time):")
    print(figures["profile"]["single_append_cumulative"])


if __name__ == "__main__":
    main()
