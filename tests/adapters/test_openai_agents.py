# mypy: disable-error-code="arg-type,typeddict-item,type-var,list-item"
"""The Agents SDK session adapter, driven by the SDK's own Runner with a
scripted model (no network, no API key)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("agents")

from agents import Agent, Model, ModelResponse, Runner, function_tool, set_tracing_disabled
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from store.adapters.openai_agents import ConvoSession
from store.memory import InMemoryRepository
from store.postgres import PostgresStorage
from store.repository import Repository

set_tracing_disabled(True)


class ScriptedModel(Model):
    """Returns canned outputs, one list per call; records the inputs."""

    def __init__(self, turns: list[list[Any]]) -> None:
        self.turns = list(turns)
        self.inputs: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> ModelResponse:
        self.inputs.append(list(input) if not isinstance(input, str) else [input])
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def _call(call_id: str, city: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        call_id=call_id,
        name="get_weather",
        arguments=json.dumps({"city": city}),
        type="function_call",
        status="completed",
    )


def _say(text: str, n: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{n}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _think(n: int) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=f"rs_{n}",
        type="reasoning",
        encrypted_content=f"enc-{n}",
        summary=[Summary(type="summary_text", text=f"thinking {n}")],
    )


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _types(items: list[Any]) -> list[str]:
    return [i.get("type", "message") + ("/" + i["role"] if "role" in i else "") for i in items]


async def test_runner_loop_with_a_tool_resumed_from_a_fresh_session(repository: Repository) -> None:
    model = ScriptedModel(
        [
            [_think(1), _call("call_1", "Paris")],
            [_say("It is sunny in Paris.", 1)],
            [_call("call_2", "Oslo")],
            [_say("Oslo too.", 2)],
        ]
    )
    agent = Agent(name="weather", instructions="Answer.", model=model, tools=[get_weather])

    first = await Runner.run(agent, "Weather in Paris?", session=ConvoSession("chat-1", repository))
    assert first.final_output == "It is sunny in Paris."

    resumed = ConvoSession("chat-1", repository)  # a new object: everything comes from the store
    second = await Runner.run(agent, "And Oslo?", session=resumed)
    assert second.final_output == "Oslo too."

    # The third model call saw the whole first run, replayed from the store.
    replayed = model.inputs[2]
    assert _types(replayed) == [
        "message/user",
        "reasoning",
        "function_call",
        "function_call_output",
        "message/assistant",
        "message/user",
    ]
    assert replayed[1]["encrypted_content"] == "enc-1"
    items = await resumed.get_items()
    assert len(items) == 9
    assert items[3] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "sunny in Paris",
    }
    assert await resumed.get_items(limit=2) == items[-2:]

    # The store has the structure: tool blocks, reasoning to replay.
    cid = resumed.conversation_id
    blocks = await repository.tool_blocks(cid)
    assert [(b.call_id, b.status) for b in blocks] == [
        ("call_1", "complete"),
        ("call_2", "complete"),
    ]
    window = await repository.visible_window(cid)
    assert window[1].reasoning[0].item_id == "rs_1"
    assert window[1].reasoning[0].data == "enc-1"
    payload = (await repository.assemble(cid, format="openai-responses")).payload
    assert any(i.get("type") == "function_call_output" for i in payload["input"])


ITEMS: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "developer",
        "content": [{"type": "input_text", "text": "dev note"}],
        "type": "message",
    },
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "high"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "auto",
            },
        ],
    },
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "abc"},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "lookup",
        "arguments": '{"query": "cats", "limit": 3, "nested": {"b": 1, "a": [1, 2]}}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "c1", "output": ""},
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "A cat.", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "no more"},
        ],
    },
    {"type": "item_reference", "id": "ref_1"},
    {"type": "function_call_output", "call_id": "nowhere", "output": "orphan"},
]


async def test_every_item_type_round_trips(repository: Repository) -> None:
    session = ConvoSession("all-types", repository)
    await session.add_items(ITEMS)
    assert await ConvoSession("all-types", repository).get_items() == ITEMS


async def test_pop_and_clear_hide_without_deleting(repository: Repository) -> None:
    session = ConvoSession("pop", repository)
    assert await session.pop_item() is None
    await session.add_items(ITEMS[:6])
    # the last item is a tool result: its block is rewritten, the call stays
    assert await session.pop_item() == ITEMS[5]
    assert await session.get_items() == ITEMS[:5]
    # the call is pending now; popping it closes it internally, then hides it
    assert await session.pop_item() == ITEMS[4]
    assert await session.get_items() == ITEMS[:4]
    # what was popped can be added again (the SDK's rewind restores this way)
    await session.add_items(ITEMS[4:6])
    assert await session.get_items() == ITEMS[:6]
    await session.add_items(
        [{"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"}]
    )
    await session.clear_session()
    assert await session.get_items() == []
    history = await repository.count_by_role(session.conversation_id, scope="history")
    assert sum(history.values()) >= 8
    await session.add_items([{"role": "user", "content": "again"}])
    assert await session.get_items() == [{"role": "user", "content": "again"}]


async def test_concurrent_first_adds_lose_nothing(repository: Repository) -> None:
    async def writer(name: str) -> None:
        session = ConvoSession("race", repository)  # each task its own object
        for i in range(10):
            await session.add_items([{"role": "user", "content": f"{name}-{i}"}])

    await asyncio.gather(writer("a"), writer("b"))
    items = await ConvoSession("race", repository).get_items()
    assert sorted(i["content"] for i in items) == sorted(
        f"{n}-{i}" for n in "ab" for i in range(10)
    )


_text = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=20
).filter(str.strip)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_message = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["user", "assistant", "system", "developer"]),
    _text,
) | st.builds(
    lambda text, i: {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{i}",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    },
    _text,
    st.integers(0, 99),
)
_opaque = st.builds(
    lambda kind, data: {"type": kind, "id": "x_1", "data": data},
    st.sampled_from(["web_search_call", "file_search_call", "future_thing"]),
    _json,
)
_reasoning = st.builds(
    lambda texts, enc: {
        "type": "reasoning",
        "id": "rs_x",
        "encrypted_content": enc,
        "summary": [{"type": "summary_text", "text": t} for t in texts],
    },
    st.lists(_text, max_size=3),
    st.none() | _text,
)


@st.composite
def _items(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 6))):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            items.append(draw(_message))
        elif choice == 1:
            items.append(draw(_opaque))
        elif choice == 2:
            items.append(draw(_reasoning))
        else:
            args = draw(st.dictionaries(_text, _json, max_size=3))
            style = draw(st.sampled_from([{}, {"separators": (",", ":")}]))
            items.append(
                {
                    "type": "function_call",
                    "call_id": f"call_{n}",
                    "name": "tool",
                    "arguments": json.dumps(args, **style),
                }
            )
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": f"call_{n}",
                    "output": draw(st.text(max_size=10).filter(lambda s: "\x00" not in s)),
                }
            )
    return items


@given(items=_items())
async def test_round_trip_property(items: list[dict[str, Any]]) -> None:
    session = ConvoSession("prop", InMemoryRepository())
    await session.add_items(items)
    assert await session.get_items() == items


# --- reading the last N, re-used call ids, key order ---------------------------------------


async def test_get_items_limit_reads_the_last_n(repository: Repository) -> None:
    session = ConvoSession("last-n", repository)
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(30)])
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    await session.add_items([call])
    await session.pop_item()  # leaves an internal result behind, never shown
    everything = await session.get_items()
    for n in (1, 3, 10, 29, 30, 31, 100):
        assert await session.get_items(limit=n) == everything[-n:]
    assert await session.get_items(limit=0) == []
    assert await ConvoSession("nobody", repository).get_items(limit=5) == []


class ReadCounter:
    """A repository that counts what its reads return (every call passed on)."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self.read: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.repository, name)
        if not (name.startswith(("read_", "visible_", "recent_", "role_")) or name == "history"):
            return method

        async def counted(*args: Any, **kwargs: Any) -> Any:
            found = await method(*args, **kwargs)
            rows = getattr(found, "items", found)
            self.read[name] = self.read.get(name, 0) + len(rows)
            return found

        return counted


async def test_get_items_limit_reads_only_the_last_n(repository: Repository) -> None:
    """`get_items(limit=N)` reads N messages (and a few internal ones it
    skips), from the end, however long the window."""
    session = ConvoSession("long", repository)
    for start in (0, 750):
        await session.add_items(
            [{"role": "user", "content": f"m{i}"} for i in range(start, start + 750)]
        )
    for n in (1, 5, 50):
        counter = ReadCounter(repository)
        items = await ConvoSession("long", counter).get_items(limit=n)
        assert items == [{"role": "user", "content": f"m{i}"} for i in range(1500 - n, 1500)]
        assert set(counter.read) == {"read_messages"}
        assert counter.read["read_messages"] <= n + 8


@pytest.fixture
def unique_violations(repository: Repository, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The unique violations PostgreSQL raised in the repository's writes
    (the storage retries some of them under the lock, out of the caller's
    sight): the storage's `writing` watched, the database real."""
    seen: list[str] = []
    storage = getattr(repository, "storage", None)
    if not isinstance(storage, PostgresStorage):
        return seen  # the memory backend has no database; over HTTP it is the server's
    writing = storage.writing

    @contextlib.asynccontextmanager
    async def watched(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        try:
            async with writing(*args, **kwargs) as session:
                yield session
        except BaseException as error:
            found: BaseException | None = error
            while found is not None:
                if isinstance(found, psycopg.errors.UniqueViolation):
                    seen.append(str(found.diag.constraint_name))
                found = found.__cause__ or found.__context__
            raise

    monkeypatch.setattr(storage, "writing", watched)
    return seen


async def test_reused_call_id_is_a_new_call_and_never_reaches_the_database(
    repository: Repository, unique_violations: list[str]
) -> None:
    """An answered call's id used again is a new call, stored under a fresh
    id, decided before the append is sent: by the session that reused it,
    by a fresh session, and by one that read the call ids before another
    session used the id (the store refuses nothing, the database neither)."""
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    session, early = ConvoSession("reuse", repository), ConvoSession("reuse", repository)
    await early.add_items([{"role": "user", "content": "hi"}])  # reads the call ids: none
    await session.add_items([call, output])
    await session.add_items([call, output])
    await ConvoSession("reuse", repository).add_items([call, output])
    await early.add_items([call, output])
    items = await session.get_items()
    assert items == [{"role": "user", "content": "hi"}, *[call, output] * 4]
    stored = await repository.read_messages("reuse", limit=100)
    ids = [c.id for m in stored for c in m.tool_calls]
    assert len(set(ids)) == 4
    assert ids[0] == "c1"
    assert unique_violations == []


async def test_items_keep_their_key_order(repository: Repository) -> None:
    session = ConvoSession("order", repository)
    items = [
        ResponseFunctionToolCall(
            id="fc_1", call_id="c1", name="f", arguments='{"b":1,"a":2}', type="function_call"
        ).model_dump(exclude_unset=True),
        {"output": "ok", "call_id": "c1", "type": "function_call_output"},
        _say("done", 2).model_dump(exclude_unset=True),
        {"type": "web_search_call", "status": "completed", "id": "ws_1", "action": {"q": "x"}},
    ]
    await session.add_items(items)
    back = await ConvoSession("order", repository).get_items()
    assert [json.dumps(i) for i in back] == [json.dumps(i) for i in items]
