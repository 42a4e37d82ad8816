"""The framework adapters beside the frameworks' own PostgreSQL stores, on the
same server, each system on a fresh database of its own.

Runs in the peers' virtualenv (`make bench-frameworks`: it has LangGraph,
langgraph-checkpoint-postgres, Google ADK and asyncpg); a framework that is
not installed is reported with the reason and the other goes on.

LangGraph, `ConvoSaver` (store.adapters.langgraph) against
`AsyncPostgresSaver` (psycopg pool, as its docs set it up):
- a `TURNS`-turn run (1,000; 100 in quick mode) of one `StateGraph` agent
  (an `add_messages` state, an agent node with a scripted chat model and a
  tool node; every 5th turn calls the tool, so the turn is user → call →
  result → answer, else user → answer), every turn an `ainvoke` on one
  thread: the run's seconds, and the bytes stored per message of the final
  state (the growth of every table of the system's database after
  `VACUUM (ANALYZE)`, `pg_total_relation_size`). Goals: at most 1/20 of the
  PostgreSQL saver's bytes, and faster.
- 8 concurrent writers on one thread (`ainvoke` of a one-node graph with
  one message each, `PER_WRITER` each): messages submitted and in the
  thread's final state (missing ones were lost silently).

Google ADK, `ConvoSessionService` (store.adapters.google_adk) against
`DatabaseSessionService` (asyncpg):
- cold load of a session of `EVENTS` events (5,000; 1,000 in quick mode:
  user text, model text, every 5th a function call and its response),
  loaded untimed; `get_session` on a new service and a new pool, connected
  before the clock; a median of `COLD_REPEATS`.
- 8 concurrent writers on one session (`append_event` of one event each,
  each writer its own Session object read once): events stored, and
  appends refused (ADK's `StaleSessionError`: the writer's session object
  is older than the stored one).

Writes bench/results/frameworks.json (not part of `make bench`'s default
list: the peers' virtualenv is needed).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Annotated, Any, TypedDict

from sqlalchemy import make_url

from bench.harness import bench_database, machine_facts, open_repository, quick_mode, vacuum
from bench.peers.run import table_sizes
from bench.peers.systems import driver_url, peer
from bench.report import comparison, print_comparisons, write_results
from hosting.engines import create_database_if_missing, drop_database
from hosting.settings import Settings, libpq_url

QUICK = quick_mode()
TURNS = 100 if QUICK else 1_000
WRITERS = 8
PER_WRITER = 10 if QUICK else 25
EVENTS = 1_000 if QUICK else 5_000
COLD_REPEATS = 3 if QUICK else 7
TOOL_EVERY = 5
TEXT = "The parser test is flaky when the input ends with a newline; " * 6  # ~370 chars


def reason(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"[:400]


@contextmanager
def databases(settings: Settings) -> Iterator[tuple[str, str]]:
    """The store's migrated database and an empty one beside it for the peer."""
    with bench_database(settings) as url:
        base = make_url(url)
        name = f"{base.database}_peer"
        create_database_if_missing(url, name)
        try:
            yield url, base.set(database=name).render_as_string(hide_password=False)
        finally:
            drop_database(url, name)


def total_bytes(url: str, settings: Settings) -> int:
    vacuum(url, settings)
    return sum(t["total"] for t in table_sizes(url).values())


# --- LangGraph ---------------------------------------------------------------------------


def _agent_graph(saver: Any) -> Any:
    messages = peer("langchain_core.messages")
    graphs = peer("langgraph.graph")
    add_messages = peer("langgraph.graph.message").add_messages
    prebuilt = peer("langgraph.prebuilt")
    tools = peer("langchain_core.tools")

    state = TypedDict("state", {"messages": Annotated[list[Any], add_messages]})  # noqa: UP013

    def read_file(path: str) -> str:
        """A file's text."""
        return f"{path}: {TEXT}"

    turn = {"n": 0}

    def agent(current: Any) -> dict[str, Any]:
        last = current["messages"][-1]
        turn["n"] += 1
        if isinstance(last, messages.HumanMessage) and turn["n"] % TOOL_EVERY == 0:
            call = {"id": f"call_{turn['n']}", "name": "read_file", "args": {"path": "a.py"}}
            return {"messages": [messages.AIMessage(content="", tool_calls=[call])]}
        return {"messages": [messages.AIMessage(content=f"answer {turn['n']}: {TEXT}")]}

    builder = graphs.StateGraph(state)
    builder.add_node("agent", agent)
    builder.add_node("tools", prebuilt.ToolNode([tools.tool(read_file)]))
    builder.add_edge(graphs.START, "agent")
    builder.add_conditional_edges("agent", prebuilt.tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def _recorder_graph(saver: Any) -> Any:
    graphs = peer("langgraph.graph")
    add_messages = peer("langgraph.graph.message").add_messages
    state = TypedDict("state", {"messages": Annotated[list[Any], add_messages]})  # noqa: UP013
    builder = graphs.StateGraph(state)
    builder.add_node("record", lambda s: {})
    builder.add_edge(graphs.START, "record")
    return builder.compile(checkpointer=saver)


@asynccontextmanager
async def _postgres_saver(url: str, size: int) -> AsyncIterator[Any]:
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    postgres = peer("langgraph.checkpoint.postgres.aio")
    pool = AsyncConnectionPool(
        libpq_url(url),
        min_size=size,
        max_size=size,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    await pool.open(wait=True)
    try:
        saver = postgres.AsyncPostgresSaver(pool)
        await saver.setup()
        yield saver
    finally:
        await pool.close()


async def _run_turns(graph: Any) -> tuple[float, int]:
    """Seconds for `TURNS` turns on one thread; messages in the final state."""
    messages = peer("langchain_core.messages")
    config = {"configurable": {"thread_id": f"run-{uuid.uuid4().hex[:8]}"}}
    started = time.perf_counter()
    for i in range(TURNS):
        await graph.ainvoke({"messages": [messages.HumanMessage(f"{i}: {TEXT}")]}, config)
    seconds = time.perf_counter() - started
    state = await graph.aget_state(config)
    return seconds, len(state.values["messages"])


async def _concurrent(graph: Any) -> dict[str, int]:
    messages = peer("langchain_core.messages")
    config = {"configurable": {"thread_id": f"busy-{uuid.uuid4().hex[:8]}"}}

    async def writer(w: int) -> None:
        for i in range(PER_WRITER):
            await graph.ainvoke({"messages": [messages.HumanMessage(f"w{w} #{i}")]}, config)

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    kept = {str(m.content) for m in (await graph.aget_state(config)).values["messages"]}
    submitted = WRITERS * PER_WRITER
    return {"submitted": submitted, "in_state": len(kept), "lost": submitted - len(kept)}


async def langgraph(settings: Settings) -> dict[str, Any]:
    from store.adapters.langgraph import ConvoSaver

    figures: dict[str, Any] = {}
    with databases(settings) as (ours_url, theirs_url):
        before = {"ours": total_bytes(ours_url, settings), "theirs": 0}
        async with open_repository(ours_url, settings) as repository:
            seconds, count = await _run_turns(_agent_graph(ConvoSaver(repository)))
            figures["ours"] = {"seconds": seconds, "messages": count}
        async with _postgres_saver(theirs_url, 10) as saver:
            before["theirs"] = total_bytes(theirs_url, settings)
            seconds, count = await _run_turns(_agent_graph(saver))
            figures["theirs"] = {"seconds": seconds, "messages": count}
        for name, url in (("ours", ours_url), ("theirs", theirs_url)):
            stored = total_bytes(url, settings) - before[name]
            figures[name]["bytes"] = stored
            figures[name]["bytes_per_message"] = stored / max(1, figures[name]["messages"])
        async with open_repository(ours_url, settings) as repository:
            figures["ours"]["concurrency"] = await _concurrent(
                _recorder_graph(ConvoSaver(repository))
            )
        async with _postgres_saver(theirs_url, 10) as saver:
            figures["theirs"]["concurrency"] = await _concurrent(_recorder_graph(saver))
    return figures


# --- Google ADK ------------------------------------------------------------------------


def _adk_events(count: int) -> list[Any]:
    events, types = peer("google.adk.events"), peer("google.genai.types")
    out = []
    for i in range(count):
        turn, step = divmod(i, TOOL_EVERY)
        invocation = f"inv-{turn:06d}"
        if step == 0:
            content = types.Content(role="user", parts=[types.Part(text=f"{i}: {TEXT}")])
            author = "user"
        elif step == 2:
            call = types.FunctionCall(id=f"call-{turn}", name="read_file", args={"path": "a.py"})
            content = types.Content(role="model", parts=[types.Part(function_call=call)])
            author = "coder"
        elif step == 3:
            response = types.FunctionResponse(
                id=f"call-{turn}", name="read_file", response={"result": TEXT}
            )
            content = types.Content(role="user", parts=[types.Part(function_response=response)])
            author = "coder"
        else:
            content = types.Content(role="model", parts=[types.Part(text=f"{i}: {TEXT}")])
            author = "coder"
        out.append(
            events.Event(
                invocation_id=invocation, author=author, content=content, timestamp=1e9 + i
            )
        )
    return out


async def _cold(open_service: Any, session_id: str) -> tuple[float, int]:
    samples, count = [], 0
    for _ in range(COLD_REPEATS):
        async with open_service() as service:
            started = time.perf_counter()
            session = await service.get_session(
                app_name="bench", user_id="u", session_id=session_id
            )
            samples.append(time.perf_counter() - started)
            count = len(session.events)
    return statistics.median(samples), count


async def _adk_concurrent(service: Any) -> dict[str, int]:
    events, types = peer("google.adk.events"), peer("google.genai.types")
    session_id = f"busy-{uuid.uuid4().hex[:8]}"
    await service.create_session(app_name="bench", user_id="u", session_id=session_id)
    refused = 0

    async def writer(w: int) -> None:
        nonlocal refused
        session = await service.get_session(app_name="bench", user_id="u", session_id=session_id)
        for i in range(PER_WRITER):
            content = types.Content(role="user", parts=[types.Part(text=f"w{w} #{i}")])
            try:
                await service.append_event(session, events.Event(author="user", content=content))
            except Exception:  # ADK's StaleSessionError: counted, not retried
                refused += 1
                session = await service.get_session(
                    app_name="bench", user_id="u", session_id=session_id
                )

    await asyncio.gather(*(writer(w) for w in range(WRITERS)))
    session = await service.get_session(app_name="bench", user_id="u", session_id=session_id)
    return {
        "submitted": WRITERS * PER_WRITER,
        "stored": len(session.events),
        "refused": refused,
        "lost": WRITERS * PER_WRITER - len(session.events) - refused,
    }


async def google_adk(settings: Settings) -> dict[str, Any]:
    from store.adapters.google_adk import ConvoSessionService, event_to_message, session_key

    sessions = peer("google.adk.sessions")
    figures: dict[str, Any] = {}
    events = _adk_events(EVENTS)
    with databases(settings) as (ours_url, theirs_url):
        async with open_repository(ours_url, settings) as repository:
            service = ConvoSessionService(repository)
            await service.create_session(app_name="bench", user_id="u", session_id="s")
            key = session_key("bench", "u", "s")
            for at in range(0, len(events), 500):  # untimed: the store's batch append
                await repository.append_messages(
                    key, [event_to_message(e) for e in events[at : at + 500]]
                )
            figures["ours"] = {"concurrency": await _adk_concurrent(service)}

        @asynccontextmanager
        async def ours() -> AsyncIterator[Any]:
            async with open_repository(ours_url, settings, pool_size=1) as repository:
                yield ConvoSessionService(repository)

        figures["ours"]["cold_s"], figures["ours"]["cold_events"] = await _cold(ours, "s")

        theirs_url_async = driver_url(theirs_url, "asyncpg")
        service = sessions.DatabaseSessionService(db_url=theirs_url_async)
        await service.prepare_tables()
        session = await service.create_session(app_name="bench", user_id="u", session_id="s")
        schema = service._get_schema_classes()
        for at in range(0, len(events), 1000):  # untimed: the rows append_event writes
            async with service.database_session_factory() as sql:
                for event in events[at : at + 1000]:
                    sql.add(schema.StorageEvent.from_event(session, event))
                await sql.commit()
        figures["theirs"] = {"concurrency": await _adk_concurrent(service)}
        await service.close()

        @asynccontextmanager
        async def theirs() -> AsyncIterator[Any]:
            fresh = sessions.DatabaseSessionService(db_url=theirs_url_async)
            await fresh.prepare_tables()
            try:
                yield fresh
            finally:
                await fresh.close()

        figures["theirs"]["cold_s"], figures["theirs"]["cold_events"] = await _cold(theirs, "s")
    return figures


# --- the run ------------------------------------------------------------------------------


# Each framework's figures, ours against its own store's: (figure, the figure
# of one side's results, unit, goal on the ratio or None, note).
Side = dict[str, Any]
FrameworkRow = tuple[str, Callable[[Side], float], str, tuple[str, float] | None, str]
FRAMEWORK_ROWS: tuple[tuple[str, str, tuple[FrameworkRow, ...]], ...] = (
    (
        "langgraph",
        "AsyncPostgresSaver",
        (
            (
                "LangGraph: bytes per message",
                lambda side: side["bytes_per_message"],
                "bytes",
                ("<=", 0.05),
                "",
            ),
            (f"LangGraph: a {TURNS}-turn run", lambda side: side["seconds"], "s", ("<=", 1.0), ""),
            (
                "LangGraph: messages lost by 8 concurrent writers",
                lambda side: side["concurrency"]["lost"],
                "messages",
                None,
                "goal: none lost",
            ),
        ),
    ),
    (
        "google_adk",
        "DatabaseSessionService",
        (
            (
                f"ADK: cold load of {EVENTS} events",
                lambda side: side["cold_s"] * 1000,
                "ms",
                ("<=", 1.0),
                "",
            ),
            (
                "ADK: appends refused or lost, 8 concurrent writers",
                lambda side: side["concurrency"]["refused"] + side["concurrency"]["lost"],
                "events",
                None,
                "goal: none",
            ),
        ),
    ),
)


def comparisons(figures: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for framework, their_store, compared_rows in FRAMEWORK_ROWS:
        found = figures.get(framework, {})
        if "ours" in found and "theirs" in found:
            rows += [
                comparison(
                    figure,
                    value(found["ours"]),
                    value(found["theirs"]),
                    unit=unit,
                    baseline_name=their_store,
                    goal=goal,
                    note=note,
                )
                for figure, value, unit, goal, note in compared_rows
            ]
    return rows


async def _run(settings: Settings) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, scenario in (("langgraph", langgraph), ("google_adk", google_adk)):
        print(f"{name} ...", flush=True)
        try:
            figures[name] = await scenario(settings)
        except ImportError as error:
            figures[name] = {
                "error": f"not installed here ({reason(error)}): run it in .venv-peers"
            }
        except Exception as error:
            figures[name] = {"error": reason(error)}
        print(f"  {figures[name]}", flush=True)
    return figures


def main() -> None:
    settings = Settings.from_env()
    figures = asyncio.run(_run(settings))
    figures["comparisons"] = comparisons(figures)
    load_before = os.getloadavg()
    with bench_database(settings) as url:
        machine = machine_facts(url, settings, load_before)
    write_results(
        "frameworks",
        figures,
        notes=__doc__ or "",
        machine={**machine, "quick": QUICK, "turns": TURNS, "events": EVENTS},
    )
    print_comparisons(
        "frameworks: the adapters beside the frameworks' own stores", figures["comparisons"]
    )


if __name__ == "__main__":
    main()
