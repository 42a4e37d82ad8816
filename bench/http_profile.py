"""Where one HTTP append's CPU goes: the app called in-process, as uvicorn
calls it, against the same append through the repository.

`python -m bench.http_profile [requests] [--memory]` (not part of `make
bench`: it records no goal; docs/http-api.md, "Speed", keeps what it
showed). `--memory`: the in-memory storage and keys instead of
PostgreSQL, so that what is left is the HTTP layer's own work.

The app is `api.app.create_app` with its lifespan run against a fresh
migrated database (PostgreSQL storage, the server's key look-up with its
NOTIFY-invalidated cache), logging as deployed (one JSON access line per
request, to a file). Each request is one ASGI call with the scope uvicorn's
httptools protocol builds; the socket, HTTP parsing and the event loop's
I/O are not in it (the server's CPU per request in `bench.http_load`
covers them).

It prints:
- CPU time (`time.process_time`, this process: client and server alike,
  the database's own time not included) per append over HTTP-in-process,
  per `Repository.append_messages` of a message built before the clock (as
  `bench.http_load`'s in-process side) and of one parsed from the same JSON,
  taken in turns so the machine's load falls on all three alike;
- a cProfile of the HTTP appends: own time per request grouped by where the
  code lives (the app, FastAPI, Starlette, pydantic, the store, the driver,
  logging, metrics, asyncio), and the top functions by cumulative and own
  time. cProfile's overhead inflates small functions: compare groups, not
  with the figures above.

`python -m bench.http_profile --count N [--assemble]`: only N requests
through the app in memory (appends, or with `--assemble` payload builds of
a 1,000-message conversation), nothing timed or profiled, for an
instruction count that the machine's load does not move:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python -m bench.http_profile --count 50     # then --count 250

the difference of the two totals ÷ 200 is one request's instructions (the
imports and the set-up are the same in both and cancel).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import logging
import logging.config
import pstats
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from fastapi import FastAPI
from starlette.types import Message

from api.app import create_app
from api.deps import Services
from api.logging import logging_config
from bench.harness import REPO_ROOT, bench_database, open_repository
from bench.http_load import create_api_key
from bench.workload import Script, as_messages
from hosting.keys import MemoryKeys
from hosting.settings import Settings, limits_from_settings
from store.memory import MemoryStorage
from store.repository import DEFAULT_TENANT, Repository

TURNS = 5  # rounds of the three sides, taken in turns
WARMUP = 200

# Own time is grouped by the first of these found in a function's file path.
GROUPS: tuple[tuple[str, str], ...] = (
    ("/api/", "api (the app)"),
    ("/fastapi/", "fastapi"),
    ("/starlette/", "starlette"),
    ("/pydantic", "pydantic"),
    ("/store/", "store"),
    ("/hosting/", "hosting (keys)"),
    ("/psycopg", "psycopg"),
    ("/sqlalchemy/", "sqlalchemy"),
    ("/prometheus_client/", "prometheus"),
    ("/logging/", "logging"),
    ("/json/", "json"),
    ("/asyncio/", "asyncio"),
    ("/uuid.py", "uuid"),
    ("/contextlib.py", "contextlib"),
    ("/anyio/", "anyio"),
)


class AsgiClient:
    """Calls an ASGI app as uvicorn's httptools protocol does, one request at a time."""

    def __init__(self, app: FastAPI, headers: dict[str, str]) -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 50000),
            "scheme": "http",
            "method": "POST",
            "root_path": "",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [
                (b"host", b"127.0.0.1:8000"),
                *self.headers,
                (b"content-length", str(len(body)).encode()),
            ],
            "state": {},
        }
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> Message:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # a disconnect never comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)


def cpu_per_call(action: Callable[[int], Awaitable[object]]) -> Callable[[int, int], Any]:
    async def run(start: int, count: int) -> float:
        began = time.process_time()
        for i in range(start, start + count):
            await action(i)
        return (time.process_time() - began) / count

    return run


def grouped(profiler: cProfile.Profile, calls: int) -> list[tuple[str, float]]:
    """Own time per request (µs) by group, largest first."""
    stats = pstats.Stats(profiler)
    totals: dict[str, float] = defaultdict(float)
    for (filename, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        own = row[2]
        group = next((label for marker, label in GROUPS if marker in filename), None)
        if group is None:
            group = "builtins (C)" if filename == "~" else f"other: {Path(filename).name}"
            if filename == "~" and ("select" in name or "poll" in name):
                group = "waiting (select/poll)"
        totals[group] += own
    return sorted(((g, s / calls * 1e6) for g, s in totals.items()), key=lambda x: -x[1])


def stats_text(profiler: cProfile.Profile, key: pstats.SortKey, top: int) -> str:
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(top)
    text = out.getvalue()
    for prefix in sorted({p for p in sys.path if p}, key=len, reverse=True):
        text = text.replace(prefix.rstrip("/") + "/", "")
    return text.replace(str(REPO_ROOT) + "/", "")


async def on_postgres(url: str, settings: Settings, requests: int) -> cProfile.Profile:
    key = await create_api_key(url, settings)
    app = create_app(settings, database_url=url)
    async with app.router.lifespan_context(app), open_repository(url, settings) as repository:
        return await measure(app, repository, key, requests)


async def in_memory(settings: Settings, requests: int) -> cProfile.Profile:
    """The same on the in-memory storage and keys: the HTTP layer's own
    work, with no database time and no driver in either side."""
    storage, keys = MemoryStorage(), MemoryKeys()
    key = keys.create(DEFAULT_TENANT, "bench http_profile")
    limits = limits_from_settings(settings)
    services = Services(
        storage=storage,
        tenant_for_key=keys.tenant_for_key,
        grant_for_key=keys.grant_for_key,
        limits=limits,
    )
    app = create_app(settings, services=services)
    repository = Repository(storage, tenant=DEFAULT_TENANT, limits=limits)
    return await measure(app, repository, key, requests)


async def measure(
    app: FastAPI, repository: Repository, key: str, requests: int
) -> cProfile.Profile:
    client = AsgiClient(app, {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    total = WARMUP + requests * (TURNS + 1)
    status, created = await client.post("/conversations", b'{"metadata":{}}')
    assert status == 201, created
    cid = orjson.loads(created)["id"]
    target = f"/conversations/{quote(cid, safe='')}/messages"
    raw = Script(seed=1, tools=True, prefix="p").take(total)
    bodies = [orjson.dumps({"messages": [m], "expected_version": 1 + i}) for i, m in enumerate(raw)]

    async def http(i: int) -> None:
        status, answer = await client.post(target, bodies[i])
        assert status == 201, answer

    built = await repository.create_conversation(metadata={})
    messages = as_messages(Script(seed=2, tools=True, prefix="q").take(total))

    async def store(i: int) -> None:
        await repository.append_messages(
            built.id, [messages[i]], expected_version=built.version + i
        )

    parsed = await repository.create_conversation(metadata={})
    raw_parsed = [orjson.dumps(m) for m in Script(seed=3, tools=True, prefix="r").take(total)]

    async def store_parsing(i: int) -> None:
        message = as_messages([orjson.loads(raw_parsed[i])])
        await repository.append_messages(parsed.id, message, expected_version=parsed.version + i)

    sides = {
        "HTTP, in-process ASGI": cpu_per_call(http),
        "repository, message built before": cpu_per_call(store),
        "repository, message parsed from JSON": cpu_per_call(store_parsing),
    }
    for side in sides.values():
        await side(0, WARMUP)
    figures: dict[str, list[float]] = {name: [] for name in sides}
    for turn in range(TURNS):
        for name, side in sides.items():
            figures[name].append(await side(WARMUP + turn * requests, requests))
    print(f"CPU per append (this process; median of {TURNS} turns of {requests}):")
    for name, values in figures.items():
        print(f"  {name:40s} {sorted(values)[len(values) // 2] * 1e6:8.0f} µs")

    profiler = cProfile.Profile()
    start = WARMUP + TURNS * requests
    profiler.enable()
    for i in range(start, start + requests):
        await http(i)
    profiler.disable()
    return profiler


ASSEMBLE_MESSAGES = 1_000


async def counted(settings: Settings, requests: int, *, assemble: bool) -> None:
    """`requests` appends (or payload builds) through the app in memory, untimed."""
    storage, keys = MemoryStorage(), MemoryKeys()
    key = keys.create(DEFAULT_TENANT, "bench http_profile")
    services = Services(
        storage=storage,
        tenant_for_key=keys.tenant_for_key,
        grant_for_key=keys.grant_for_key,
        limits=limits_from_settings(settings),
    )
    app = create_app(settings, services=services)
    client = AsgiClient(app, {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    status, created = await client.post("/conversations", b'{"metadata":{}}')
    assert status == 201, created
    cid = quote(orjson.loads(created)["id"], safe="")
    if assemble:
        raw = Script(seed=1, tools=True, prefix="p").take(ASSEMBLE_MESSAGES)
        for start in range(0, ASSEMBLE_MESSAGES, 100):
            body = orjson.dumps({"messages": raw[start : start + 100]})
            status, answer = await client.post(f"/conversations/{cid}/messages", body)
            assert status == 201, answer
        target, bodies = f"/conversations/{cid}/assemble", [b'{"format":"openai-chat"}'] * requests
        expected = 200
    else:
        raw = Script(seed=1, tools=True, prefix="p").take(requests)
        target = f"/conversations/{cid}/messages"
        bodies = [
            orjson.dumps({"messages": [m], "expected_version": 1 + i}) for i, m in enumerate(raw)
        ]
        expected = 201
    for body in bodies:
        status, answer = await client.post(target, body)
        assert status == expected, answer[:500]


def report(profiler: cProfile.Profile, requests: int, log: Path) -> None:
    print(f"\nOwn time per HTTP append under cProfile, by where the code lives ({requests} calls):")
    for group, micros in grouped(profiler, requests):
        if micros >= 1:
            print(f"  {group:32s} {micros:8.0f} µs")
    print(stats_text(profiler, pstats.SortKey.CUMULATIVE, 60))
    print(stats_text(profiler, pstats.SortKey.TIME, 40))
    print(f"(access log: {log})")


def main() -> None:
    memory = "--memory" in sys.argv
    numbers = [arg for arg in sys.argv[1:] if arg.isdigit()]
    requests = int(numbers[0]) if numbers else 500
    settings = Settings.from_env()
    log = Path("/tmp") / "convo-http-profile.log"
    config = logging_config(settings)
    logging.config.dictConfig(config)
    stream = log.open("w")
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)
    try:
        if "--count" in sys.argv:
            asyncio.run(counted(settings, requests, assemble="--assemble" in sys.argv))
            return
        if memory:
            profiler = asyncio.run(in_memory(settings, requests))
        else:
            with bench_database(settings) as url:
                profiler = asyncio.run(on_postgres(url, settings, requests))
        report(profiler, requests, log)
    finally:
        stream.close()


if __name__ == "__main__":
    main()
