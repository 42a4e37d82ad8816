"""`make reliability`: a bounded soak of the HTTP service, on loopback, with the
database restarted once mid-run; then an integrity check.

    CONVO_SOAK_SECONDS   how long the run is paced to take (default 300)
    CONVO_SOAK_REQUESTS  how many requests (default 30 per second of it)
    CONVO_SOAK_CONCURRENCY  clients sending at once (default 8)
    CONVO_SOAK_LOG       set to show the server's log below ERROR

The app (`api.app.create_app`, as `convo serve` builds it) runs in this
process under uvicorn on 127.0.0.1, on a free port. Without DATABASE_URL it
uses an embedded PostgreSQL in a temporary directory, deleted afterwards,
and restarts it (`pg_ctl stop`, then start) half-way through; with
DATABASE_URL the restart is skipped (we do not own that server) and only
this run's tenants' conversations are checked.

The fixed request count is a mix, over two tenants' conversations: appends
(1–3 messages, sometimes a tool call and its result, every message with a
client message id; one in ten sent again after its answer, which must be a
replay of the same seqs), reads (window, counts, recent, batches, a read of
the other tenant's conversation that must be a 404), payload builds and
batch operations (truncate, filter, clear). A 503, or a 409 with
Retry-After (ConversationBusy), or a broken connection is retried after
Retry-After with the same body and ids, as a client should.

Afterwards, read from the database itself:
- every acknowledged message is stored exactly once (by client message id,
  in the event log and in the messages view), at the seq its answer gave;
  no message is stored that no client sent;
- every conversation's event versions are 1..n without a gap;
- each conversation's projections equal a rebuild from its events
  (`store.repository.rebuild`), row for row.
It prints requests, answers by status, p50/p99 latency and the result;
the exit code is 1 if the integrity check fails.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import os
import random
import re
import socket
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from api.app import create_app
from api.logging import logging_config
from hosting import migrate
from hosting.bootstrap import open_storage
from hosting.database import EMBEDDED_DATABASE
from hosting.embedded import EmbeddedPostgres
from hosting.engines import create_database_if_missing, make_async_engine, make_sync_engine
from hosting.keys import create_key
from hosting.settings import Settings
from store.domain.conversation_keys import stream_id
from store.postgres import PostgresStorage
from store.postgres.tables import PROJECTION_TABLES
from store.repository.rebuild import rebuild_conversation

TENANTS = ("soak-acme", "soak-globex")
CONVERSATIONS_PER_TENANT = 8
RATE_PER_SECOND = 30
MAX_ATTEMPTS = 30
MAX_RETRY_WAIT_S = 5.0
# What a rebuild sets on the stream row (the rest is the stream's own).
PROJECTED_CONVERSATION_COLUMNS = ["next_seq", "current_batch", "archived_at", "metadata"]
WORDS = ("alpha", "beta", "parser", "fix", "done", "日本語", "error", "ok", "todo", "files")


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


@dataclass
class Tally:
    """What the clients saw."""

    statuses: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    requests: int = 0  # logical requests (a retried one counts once)
    attempts: int = 0  # HTTP attempts
    retried: int = 0  # logical requests that needed more than one attempt
    gave_up: int = 0
    # client message id -> (conversation, seq) as acknowledged
    acked: dict[str, tuple[str, int]] = field(default_factory=dict)
    unacked: set[str] = field(default_factory=set)  # sent, never acknowledged
    problems: list[str] = field(default_factory=list)


@dataclass
class Soak:
    client: httpx.AsyncClient
    keys: dict[str, str]
    conversations: dict[str, list[str]]  # tenant -> conversation ids
    tally: Tally

    async def send(
        self, tenant: str, method: str, url: str, body: Any = None
    ) -> httpx.Response | None:
        """One logical request, retried on 503, busy 409 and broken connections."""
        self.tally.requests += 1
        headers = {"Authorization": f"Bearer {self.keys[tenant]}"}
        for attempt in range(MAX_ATTEMPTS):
            if attempt == 1:
                self.tally.retried += 1
            self.tally.attempts += 1
            started = time.perf_counter()
            try:
                response = await self.client.request(method, url, json=body, headers=headers)
            except httpx.TransportError as error:
                self.tally.latencies.append(time.perf_counter() - started)
                self.tally.statuses[type(error).__name__] += 1
                await asyncio.sleep(0.5)
                continue
            self.tally.latencies.append(time.perf_counter() - started)
            self.tally.statuses[str(response.status_code)] += 1
            retry_after = response.headers.get("Retry-After")
            if response.status_code == 503 or (response.status_code == 409 and retry_after):
                await asyncio.sleep(min(float(retry_after or 1), MAX_RETRY_WAIT_S))
                continue
            return response
        self.tally.gave_up += 1
        return None

    def expect(self, response: httpx.Response | None, *statuses: int, what: str) -> bool:
        if response is None:
            return False
        if response.status_code not in statuses:
            self.tally.problems.append(f"{what}: {response.status_code} {response.text[:200]}")
            return False
        return True

    async def append(self, rng: random.Random, tenant: str, conversation: str) -> None:
        messages: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 2)):
            role = rng.choice(("user", "assistant"))
            text = " ".join(rng.choices(WORDS, k=rng.randint(3, 30)))
            messages.append({"role": role, "content": text})
        if rng.random() < 0.3:
            call = f"call_{uuid.uuid4().hex[:12]}"
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": call, "name": "grep", "arguments": {"q": "x"}}],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call, "content": "3 matches"})
        for message in messages:
            message["client_message_id"] = uuid.uuid4().hex
        ids = [m["client_message_id"] for m in messages]
        self.tally.unacked.update(ids)
        url = f"/conversations/{conversation}/messages"
        response = await self.send(tenant, "POST", url, {"messages": messages})
        if not self.expect(response, 200, 201, what="append"):
            return
        assert response is not None
        stored = response.json()["messages"]
        seqs = [m["seq"] for m in stored]
        for cid, seq in zip(ids, seqs, strict=True):
            self.tally.acked[cid] = (conversation, seq)
            self.tally.unacked.discard(cid)
        if rng.random() < 0.1:  # the client did not see the answer: it sends again
            again = await self.send(tenant, "POST", url, {"messages": messages})
            if self.expect(again, 200, what="append retried"):
                assert again is not None
                replayed = [m["seq"] for m in again.json()["messages"]]
                if replayed != seqs or again.json().get("replayed") is not True:
                    self.tally.problems.append(f"retried append not a replay: {seqs} {replayed}")

    async def read(self, rng: random.Random, tenant: str, conversation: str) -> None:
        path = rng.choice(
            ("window", "counts", "messages/recent?role=user&n=5", "batches", "tool-blocks")
        )
        response = await self.send(tenant, "GET", f"/conversations/{conversation}/{path}")
        self.expect(response, 200, what=f"read {path.split('?')[0]}")

    async def foreign_read(self, rng: random.Random, tenant: str) -> None:
        other = next(t for t in TENANTS if t != tenant)
        conversation = rng.choice(self.conversations[other])
        response = await self.send(tenant, "GET", f"/conversations/{conversation}/window")
        self.expect(response, 404, what="another tenant's conversation")

    async def assemble(self, rng: random.Random, tenant: str, conversation: str) -> None:
        body = {"format": rng.choice(("openai-chat", "anthropic"))}
        response = await self.send(tenant, "POST", f"/conversations/{conversation}/assemble", body)
        # A window a filter and a clear emptied has nothing to send: refused, by name.
        if (
            response is not None
            and response.status_code == 422
            and response.json()["type"] == "EmptyWindow"
        ):
            return
        self.expect(response, 200, what="assemble")

    async def batch(self, rng: random.Random, tenant: str, conversation: str) -> None:
        body = rng.choice(
            (
                {"operation": "truncate", "keep_last": rng.randint(5, 40), "adjust": True},
                {"operation": "filter", "roles": ["user", "assistant", "tool"], "adjust": True},
                {"operation": "clear", "keep_system": True},
            )
        )
        response = await self.send(tenant, "POST", f"/conversations/{conversation}/batches", body)
        # 422: a window the operation cannot apply to (e.g. empty); nothing changes.
        self.expect(response, 201, 422, what=f"batch {body['operation']}")

    async def one(self, index: int) -> None:
        rng = random.Random(index)
        tenant = rng.choice(TENANTS)
        conversation = rng.choice(self.conversations[tenant])
        roll = rng.random()
        if roll < 0.45:
            await self.append(rng, tenant, conversation)
        elif roll < 0.75:
            await self.read(rng, tenant, conversation)
        elif roll < 0.80:
            await self.foreign_read(rng, tenant)
        elif roll < 0.95:
            await self.assemble(rng, tenant, conversation)
        else:
            await self.batch(rng, tenant, conversation)


@contextmanager
def database(settings: Settings) -> Iterator[tuple[str, EmbeddedPostgres | None]]:
    if settings.database_url:
        yield settings.database_url, None
        return
    with tempfile.TemporaryDirectory(prefix="convo-soak-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pgdata", delete_on_exit=True)
        try:
            create_database_if_missing(server.url, EMBEDDED_DATABASE)
            from sqlalchemy import make_url

            url = make_url(server.url).set(database=EMBEDDED_DATABASE)
            yield url.render_as_string(hide_password=False), server
        finally:
            server.stop()


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


async def snapshot(storage: PostgresStorage, conversation: str) -> dict[str, list[tuple[Any, ...]]]:
    tables: dict[str, list[tuple[Any, ...]]] = {}
    async with storage.pool.connection() as conn:
        for name, columns, key in [
            *((t.name, list(t.c.keys()), "conversation_id") for t in PROJECTION_TABLES),
            ("conversations", PROJECTED_CONVERSATION_COLUMNS, "id"),
        ]:
            cursor = await conn.execute(
                f"SELECT {', '.join(columns)} FROM {name} WHERE {key} = %s", (conversation,)
            )
            tables[name] = sorted((tuple(r) for r in await cursor.fetchall()), key=repr)
    return tables


async def check_integrity(url: str, settings: Settings, soak: Soak) -> list[str]:
    failures: list[str] = []
    tally = soak.tally
    # The checks read tables, keyed by stream id (store.domain.conversation_keys);
    # the clients know the conversations by the ids the API gave them.
    stream_of = {
        key: str(stream_id(tenant, key))
        for tenant, keys in soak.conversations.items()
        for key in keys
    }
    ours = list(stream_of.values())
    storage = await open_storage(url, settings, max_size=2)
    try:
        async with storage.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT conversation_id::text, data -> 'message' ->> 'client_message_id',"
                " count(*) FROM events WHERE conversation_id = ANY(%s::uuid[])"
                " AND type = 'message_appended'"
                " AND data -> 'message' ->> 'client_message_id' IS NOT NULL GROUP BY 1, 2",
                (ours,),
            )
            in_log = {(c, cid): n for c, cid, n in await cursor.fetchall()}
            cursor = await conn.execute(
                "SELECT conversation_id::text, client_message_id, seq FROM messages"
                " WHERE conversation_id = ANY(%s::uuid[]) AND client_message_id IS NOT NULL",
                (ours,),
            )
            in_view: dict[tuple[str, str], list[int]] = {}
            for c, cid, seq in await cursor.fetchall():
                in_view.setdefault((c, cid), []).append(seq)
            cursor = await conn.execute(
                "SELECT conversation_id::text, count(*), min(version), max(version) FROM events"
                " WHERE conversation_id = ANY(%s::uuid[]) GROUP BY 1",
                (ours,),
            )
            for c, count, low, high in await cursor.fetchall():
                if (low, high) != (1, count):
                    failures.append(f"{c}: versions {low}..{high} for {count} events")
        for cid, (conversation, seq) in tally.acked.items():
            logged = in_log.get((stream_of[conversation], cid), 0)
            viewed = in_view.get((stream_of[conversation], cid), [])
            if logged != 1 or viewed != [seq]:
                failures.append(
                    f"acknowledged {cid} (seq {seq}): {logged} event(s), seqs {viewed} in the view"
                )
        known = set(tally.acked) | tally.unacked
        for (conversation, cid), n in in_log.items():
            if cid not in known:
                failures.append(f"{conversation}: stored {cid}, which no client sent")
            elif n != 1:
                failures.append(f"{conversation}: {cid} stored {n} times")
        for conversation in ours:
            inline = await snapshot(storage, conversation)
            await rebuild_conversation(storage, uuid.UUID(conversation))  # a stream id
            rebuilt = await snapshot(storage, conversation)
            for name in inline:
                if inline[name] != rebuilt[name]:
                    failures.append(f"{conversation}: {name} differs from a rebuild")
    finally:
        await storage.close()
    return failures


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


async def run(url: str, server: EmbeddedPostgres | None, settings: Settings) -> int:
    seconds = _env_number("CONVO_SOAK_SECONDS", 300.0)
    total = int(_env_number("CONVO_SOAK_REQUESTS", round(seconds * RATE_PER_SECOND)))
    concurrency = int(_env_number("CONVO_SOAK_CONCURRENCY", 8))
    print(
        f"soak: {total} requests over ~{seconds:g} s, {concurrency} clients, database: "
        + ("embedded (restarted half-way)" if server else "DATABASE_URL (restart skipped)"),
        flush=True,
    )

    engine = make_async_engine(url, settings, pool_size=1, max_overflow=1)
    try:
        keys = {t: (await create_key(engine, t, "soak"))[1] for t in TENANTS}
    finally:
        await engine.dispose()

    app = create_app(settings, database_url=url)
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    http = uvicorn.Server(config)
    serving = asyncio.create_task(http.serve(sockets=[sock]))
    while not http.started:
        if serving.done():
            serving.result()
            return 2
        await asyncio.sleep(0.05)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    restart_note = "skipped (DATABASE_URL: not our server)"
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=30.0, limits=limits
    ) as client:
        soak = Soak(client, keys, {t: [] for t in TENANTS}, Tally())
        for tenant in TENANTS:
            for _ in range(CONVERSATIONS_PER_TENANT):
                response = await soak.send(tenant, "POST", "/conversations", {})
                assert response is not None, "creating a conversation gave up"
                assert response.status_code == 201, response.text
                soak.conversations[tenant].append(response.json()["id"])
                await soak.send(
                    tenant,
                    "POST",
                    f"/conversations/{soak.conversations[tenant][-1]}/messages",
                    {"messages": [{"role": "system", "content": "You are terse."}]},
                )

        started = time.monotonic()
        interval = seconds / max(total, 1)
        next_index = 0

        async def worker() -> None:
            nonlocal next_index
            while next_index < total:
                index = next_index
                next_index += 1
                delay = started + index * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await soak.one(index)

        async def restart() -> str:
            assert server is not None
            await asyncio.sleep(seconds / 2)
            down = time.monotonic()
            await asyncio.to_thread(server.restart)
            return f"at {down - started:.1f} s, back after {time.monotonic() - down:.1f} s"

        restarting = asyncio.create_task(restart()) if server else None
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        if restarting is not None:
            restart_note = await restarting
        elapsed = time.monotonic() - started
        metrics = (await client.get("/metrics")).text

    http.should_exit = True
    await serving

    tally = soak.tally
    latencies = sorted(tally.latencies)
    print(f"ran {elapsed:.1f} s; database restart: {restart_note}")
    print(
        f"requests: {tally.requests} ({tally.attempts} HTTP attempts; {tally.retried} retried,"
        f" {tally.gave_up} given up)"
    )
    print("answers by status: " + ", ".join(f"{s}: {n}" for s, n in sorted(tally.statuses.items())))
    print(
        f"latency per attempt: p50 {percentile(latencies, 0.5) * 1000:.1f} ms,"
        f" p99 {percentile(latencies, 0.99) * 1000:.1f} ms,"
        f" max {(latencies[-1] if latencies else 0) * 1000:.1f} ms"
    )
    errors = re.findall(r'^convo_storage_errors_total\{type="(\w+)"\} (\d+)$', metrics, re.M)
    print("server storage errors (/metrics): " + ", ".join(f"{t}: {n}" for t, n in errors))
    for problem in tally.problems[:10]:
        print(f"unexpected answer: {problem}")

    failures = await check_integrity(url, settings, soak)
    print(
        f"integrity: {len(tally.acked)} acknowledged messages, {len(tally.unacked)} never"
        f" acknowledged, {sum(len(c) for c in soak.conversations.values())} conversations: "
        + ("OK" if not failures else f"{len(failures)} FAILURE(S)")
    )
    for failure in failures[:20]:
        print(f"  {failure}")
    if failures:
        return 1
    return 1 if tally.problems else 0


def main() -> int:
    settings = Settings.from_env()
    logging.config.dictConfig(logging_config(settings))
    # The server's warnings while the database restarts are expected: errors only
    # (CONVO_SOAK_LOG=1 shows everything).
    if not os.environ.get("CONVO_SOAK_LOG"):
        logging.disable(logging.WARNING)
    with database(settings) as (url, server):
        engine = make_sync_engine(url, settings)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        return asyncio.run(run(url, server, settings))


if __name__ == "__main__":
    sys.exit(main())
