"""The LangGraph checkpointer: LangGraph's own conformance suite, a
`StateGraph` agent (a scripted chat model, a tool node) beside LangGraph's
`InMemorySaver`, concurrent runs on one thread, and how messages are kept."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, message_to_dict
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

from store.adapters._loop import run_sync
from store.adapters.langgraph import ConvoSaver
from store.memory import InMemoryRepository
from store.postgres import PostgresStorage
from store.repository import Repository


class State(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    turns: int


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _script() -> Iterator[AIMessage]:
    """The model's answers: every second turn calls the tool first."""
    n = 0
    while True:
        n += 1
        if n % 3 == 1:
            yield AIMessage(
                content="",
                tool_calls=[{"id": f"call_{n}", "name": "get_weather", "args": {"city": f"c{n}"}}],
            )
        else:
            yield AIMessage(content=f"answer {n}")


def _graph(saver: Any) -> Any:
    model = GenericFakeChatModel(messages=_script())

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])], "turns": state.get("turns", 0) + 1}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([get_weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def _plain(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Messages without their ids (random in every run)."""
    out = []
    for message in messages:
        data = message_to_dict(message)
        data["data"].pop("id", None)
        out.append(data)
    return out


def _state(snapshot: Any) -> dict[str, Any]:
    values = dict(snapshot.values)
    values["messages"] = _plain(values.get("messages", []))
    metadata = {k: v for k, v in snapshot.metadata.items() if k in ("source", "step")}
    return {"values": values, "next": snapshot.next, "metadata": metadata}


# --- LangGraph's conformance suite -----------------------------------------------------


async def test_conformance(repository: Repository) -> None:
    @checkpointer_test(name="ConvoSaver")
    async def saver() -> Any:
        yield ConvoSaver(repository)

    report = await validate(saver)
    failures = {name: r.failures for name, r in report.results.items() if r.passed is False}
    assert not failures, failures
    assert report.passed_all_base()
    passed = {name for name, r in report.results.items() if r.passed}
    assert passed == {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread"}


# --- in LangGraph's run loop, beside its in-memory saver ------------------------------------


async def test_agent_run_matches_in_memory_saver(repository: Repository) -> None:
    ours, theirs = _graph(ConvoSaver(repository)), _graph(InMemorySaver())
    config = {"configurable": {"thread_id": "agent-1"}}
    for turn in range(6):
        question = {"messages": [HumanMessage(f"question {turn}")]}
        a = await ours.ainvoke(question, config)
        b = await theirs.ainvoke(question, config)
        assert _plain(a["messages"]) == _plain(b["messages"])
        assert _state(await ours.aget_state(config)) == _state(await theirs.aget_state(config))
    history_a = [_state(s) async for s in ours.aget_state_history(config)]
    history_b = [_state(s) async for s in theirs.aget_state_history(config)]
    assert history_a == history_b
    # A fresh saver (another process) reads the same states back.
    fresh = _graph(ConvoSaver(repository))
    assert _state(await fresh.aget_state(config)) == _state(await theirs.aget_state(config))


async def test_each_message_is_stored_once(repository: Repository) -> None:
    graph = _graph(ConvoSaver(repository))
    config = {"configurable": {"thread_id": "once"}}
    for turn in range(5):
        await graph.ainvoke({"messages": [HumanMessage(f"q{turn}")]}, config)
    state = await graph.aget_state(config)
    stored = await repository.read_messages("once", limit=1000)
    assert [m.agent_id for m in stored] == ["main"] * len(stored)
    assert len(stored) == len(state.values["messages"])
    assert [m.text for m in stored] == [
        m.content if isinstance(m.content, str) else "" for m in state.values["messages"]
    ]


async def test_time_travel_branches_as_in_memory(repository: Repository) -> None:
    ours, theirs = _graph(ConvoSaver(repository)), _graph(InMemorySaver())
    config = {"configurable": {"thread_id": "travel"}}
    for graph in (ours, theirs):
        for turn in range(3):
            await graph.ainvoke({"messages": [HumanMessage(f"q{turn}")]}, config)
    # Back to the checkpoint before the second question, and ask another.
    states = {}
    for name, graph in (("ours", ours), ("theirs", theirs)):
        history = [s async for s in graph.aget_state_history(config)]
        earlier = next(s for s in history if s.metadata["step"] == 4)
        branched = await graph.aupdate_state(earlier.config, {"messages": [HumanMessage("again")]})
        await graph.ainvoke(None, branched)
        states[name] = _state(await graph.aget_state(config))
    assert states["ours"] == states["theirs"]


def _with_subgraph(saver: Any) -> Any:
    """A parent graph whose first node is a subgraph that asks the user
    (an interrupt) before it ends: its checkpoints are the namespace
    `sub:<task id>`'s."""

    def ask(state: Chat) -> dict[str, Any]:
        return {"messages": [HumanMessage(f"user said {interrupt('go on?')}")]}

    sub = StateGraph(Chat)
    sub.add_node("think", lambda state: {"messages": [AIMessage("thinking")]})
    sub.add_node("ask", ask)
    sub.add_edge(START, "think")
    sub.add_edge("think", "ask")
    parent = StateGraph(Chat)
    parent.add_node("sub", sub.compile())
    parent.add_node("final", lambda state: {"messages": [AIMessage(f"{len(state['messages'])}")]})
    parent.add_edge(START, "sub")
    parent.add_edge("sub", "final")
    return parent.compile(checkpointer=saver)


def _nested(snapshot: Any) -> dict[str, Any]:
    """A state with its subgraphs' states and interrupts."""
    return {
        **_state(snapshot),
        "tasks": [
            (
                task.name,
                [i.value for i in task.interrupts],
                None if task.state is None else _nested(task.state),
            )
            for task in snapshot.tasks
        ],
    }


async def test_subgraph_namespace_as_in_memory(repository: Repository) -> None:
    """A subgraph's checkpoints, read back with the parent's (by this saver
    and by a fresh one), are InMemorySaver's; its messages are stored once,
    in the agent of its namespace."""
    ours, theirs = _with_subgraph(ConvoSaver(repository)), _with_subgraph(InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "nested"}}
    for graph in (ours, theirs):
        await graph.ainvoke({"messages": [HumanMessage("hi")]}, config)
    expected = _nested(await theirs.aget_state(config, subgraphs=True))
    assert expected["tasks"][0][2] is not None  # the subgraph's own state
    assert _nested(await ours.aget_state(config, subgraphs=True)) == expected
    fresh = _with_subgraph(ConvoSaver(repository))
    assert _nested(await fresh.aget_state(config, subgraphs=True)) == expected
    for graph in (ours, theirs):
        await graph.ainvoke(Command(resume="yes"), config)
    expected = _state(await theirs.aget_state(config))
    assert [m["data"]["content"] for m in expected["values"]["messages"]] == [
        "hi",
        "thinking",
        "user said yes",
        "3",
    ]
    for graph in (ours, _with_subgraph(ConvoSaver(repository))):
        assert _state(await graph.aget_state(config)) == expected
        history = [_state(s) async for s in graph.aget_state_history(config)]
        assert history == [_state(s) async for s in theirs.aget_state_history(config)]
    stored = await repository.read_messages("nested", limit=100)
    assert [m.text for m in stored] == ["hi", "thinking", "user said yes", "3"]
    lanes = [m.agent_id for m in stored]
    assert lanes[0] == lanes[3] == "main"
    assert lanes[1] == lanes[2]
    assert lanes[1].startswith("graph:sub:")


def test_sync_api() -> None:
    _sync_turns(InMemoryRepository())


def test_sync_api_on_postgres(database_url: str) -> None:
    """The sync methods over PostgreSQL: the storage connected on the loop
    they run on (the adapters' background loop), as docs/adapters.md says."""
    storage = run_sync(PostgresStorage.connect(database_url))
    try:
        _sync_turns(Repository(storage))
    finally:
        run_sync(storage.close())


def _sync_turns(repository: Repository) -> None:
    graph = _graph(ConvoSaver(repository))
    reference = _graph(InMemorySaver())
    config = {"configurable": {"thread_id": "sync"}}
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"q{turn}")]}, config)
        reference.invoke({"messages": [HumanMessage(f"q{turn}")]}, config)
    assert _state(graph.get_state(config)) == _state(reference.get_state(config))
    assert len(list(graph.get_state_history(config))) == len(
        list(reference.get_state_history(config))
    )


async def test_delete_thread_then_reuse(repository: Repository) -> None:
    saver = ConvoSaver(repository)
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "reset"}}
    await graph.ainvoke({"messages": [HumanMessage("first")]}, config)
    await saver.adelete_thread("reset")
    assert await saver.aget_tuple(config) is None
    result = await graph.ainvoke({"messages": [HumanMessage("second")]}, config)
    assert result["messages"][0].content == "second"
    # Another saver finds the thread's new conversation too.
    assert (await ConvoSaver(repository).aget_tuple(config)) is not None


# --- concurrent runs on one thread -----------------------------------------------------------


class Chat(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


def _recorder(saver: Any) -> Any:
    def record(state: Chat) -> dict[str, Any]:
        return {}

    builder = StateGraph(Chat)
    builder.add_node("record", record)
    builder.add_edge(START, "record")
    return builder.compile(checkpointer=saver)


# Trials per backend: a race lost in one trial of many must show, and the
# memory backend's trials are the cheapest.
TRIALS = {"memory": 30, "postgres": 6, "http": 2}


def _trials(request: pytest.FixtureRequest) -> int:
    return TRIALS[request.node.callspec.params["repository"]]


async def _concurrent_runs(
    repository: Repository, thread_id: str, graphs: list[Any], per_writer: int
) -> list[str]:
    """Each graph a writer of `per_writer` runs of one message each, all at
    once on one thread; the final state's messages, checked against what
    the store holds (each message stored once, each writer's in order)."""
    config = {"configurable": {"thread_id": thread_id}}

    async def writer(w: int) -> None:
        for i in range(per_writer):
            await graphs[w].ainvoke({"messages": [HumanMessage(f"w{w} #{i}")]}, config)

    await asyncio.gather(*(writer(w) for w in range(len(graphs))))
    state = await _recorder(ConvoSaver(repository)).aget_state(config)
    texts = [str(m.content) for m in state.values["messages"]]
    stored = [m.text for m in await repository.read_messages(thread_id, limit=1000)]
    assert sorted(texts) == sorted(stored)
    for w in range(len(graphs)):
        mine = [t for t in texts if t.startswith(f"w{w} ")]
        assert mine == sorted(mine)
    return texts


def _submitted(writers: int, per_writer: int) -> list[str]:
    return sorted(f"w{w} #{i}" for w in range(writers) for i in range(per_writer))


@pytest.mark.slow
async def test_concurrent_runs_lose_no_input(
    repository: Repository, request: pytest.FixtureRequest
) -> None:
    """8 writers of 6 runs each on one thread through one saver: every
    run's input is in the final state, once, trial after trial."""
    graph = _recorder(ConvoSaver(repository))
    for trial in range(_trials(request)):
        texts = await _concurrent_runs(repository, f"busy-{trial}", [graph] * 8, 6)
        assert sorted(texts) == _submitted(8, 6), f"trial {trial}"


@pytest.mark.slow
async def test_concurrent_runs_in_separate_savers_lose_no_input(
    repository: Repository, request: pytest.FixtureRequest
) -> None:
    """Writers that share no memory (as separate processes would)."""
    for trial in range(max(1, _trials(request) // 2)):
        graphs = [_recorder(ConvoSaver(repository)) for _ in range(8)]
        texts = await _concurrent_runs(repository, f"apart-{trial}", graphs, 4)
        assert sorted(texts) == _submitted(8, 4), f"trial {trial}"


async def test_a_checkpoint_read_is_the_callers_own(repository: Repository) -> None:
    """LangGraph's loop changes the checkpoint it read in place (its
    channel versions, what each node has seen): a run doing so must not
    change what another run reads, or that run finds nothing left to do
    and its input is never applied."""
    saver = ConvoSaver(repository)
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "own"}}
    await graph.ainvoke({"messages": [HumanMessage("q")]}, config)
    first = await saver.aget_tuple(config)
    assert first is not None
    before = copy.deepcopy(first)
    checkpoint = first.checkpoint
    for versions in (checkpoint["channel_versions"], *checkpoint["versions_seen"].values()):
        for channel in versions:
            versions[channel] = "9999999999.ffffffff"
    checkpoint["versions_seen"]["agent"]["new"] = 1
    checkpoint["channel_values"]["turns"] = 99
    checkpoint["channel_values"]["messages"].clear()
    first.metadata["step"] = 99
    for tuple_ in (await saver.aget_tuple(config), await ConvoSaver(repository).aget_tuple(config)):
        assert tuple_ == before
