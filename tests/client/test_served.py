"""Both clients against a real server: the app under uvicorn (in a thread of
this process, as `convo serve` runs it) on PostgreSQL, with a key from the
database. The SSE tail needs a server that streams: httpx's in-process
transport waits for a response's end, and a tail never ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncEngine

from api.app import create_app
from hosting.keys import create_key
from hosting.settings import Settings
from store.client import AsyncConvoClient, ConvoClient
from store.client.sse import EventStreamReader
from store.domain.errors import ConversationNotFound
from store.domain.feed import FeedEvent
from tests.client.serving import on_uvicorn

HI = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.fixture
def base_url(database_url: str, settings: Settings) -> Iterator[str]:
    with on_uvicorn(create_app(settings, database_url=database_url)) as url:
        yield url


@pytest_asyncio.fixture
async def key(engine: AsyncEngine) -> str:
    _, plaintext = await create_key(engine, "default", "tests")
    return plaintext


@pytest_asyncio.fixture
async def client(base_url: str, key: str) -> AsyncIterator[AsyncConvoClient]:
    async with AsyncConvoClient(base_url, api_key=key) as client:
        yield client


async def _first(events: AsyncGenerator[FeedEvent, None], n: int) -> list[FeedEvent]:
    found: list[FeedEvent] = []
    async with contextlib.aclosing(events):
        async for event in events:
            found.append(event)
            if len(found) == n:
                break
    return found


async def test_the_tail_streams_events_as_they_commit_and_resumes_after_a_checkpoint(
    client: AsyncConvoClient,
) -> None:
    await client.create_conversation("c")
    reading = asyncio.create_task(_first(client.tail(after="0-0", heartbeat=0.1), 3))
    await asyncio.sleep(0.3)  # the tail is open and quiet: heartbeats only
    await client.append_messages("c", HI)
    events = await asyncio.wait_for(reading, 30)
    assert [e.type for e in events] == [
        "conversation_started",
        "message_appended",
        "message_appended",
    ]
    assert [e.data["message"]["content"] for e in events[1:]] == ["hi", "hello"]
    resumed = await asyncio.wait_for(_first(client.tail(after=events[0].checkpoint), 2), 30)
    assert resumed == events[1:]


def _sync_flow(base_url: str, key: str) -> list[FeedEvent]:
    with ConvoClient(base_url, api_key=key) as client:
        client.create_conversation("s")
        client.append_messages("s", HI)
        assert [m.content for m in client.visible_window("s")] == ["hi", "hello"]
        assert [m.seq for m in client.iter_messages("s", order="desc", page_size=1)] == [2, 1]
        assert [line["seq"] for line in client.export("s")] == [1, 2]
        with pytest.raises(ConversationNotFound):
            client.get_conversation("nobody")
        tail = client.tail(after="0-0", heartbeat=0.1)
        try:
            return [next(tail) for _ in range(3)]
        finally:
            tail.close()


async def test_the_sync_client_and_its_tail(base_url: str, key: str) -> None:
    events = await asyncio.to_thread(_sync_flow, base_url, key)
    assert [e.version for e in events] == [1, 2, 3]


async def test_a_broken_stream_is_opened_again_after_the_last_id_seen() -> None:
    streams = [
        ": connected\n\n: heartbeat\nid: 5-0\n\n",
        ": connected\n\nid: 6-1\nevent: conversation_started\ndata: "
        + FeedEvent(
            checkpoint="6-1",
            conversation_id="c",
            version=1,
            type="conversation_started",
            recorded_at="2026-11-27T12:00:00Z",
            data={},
        ).model_dump_json()
        + "\n\n",
    ]
    sent: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers.get("Last-Event-ID"))
        return httpx.Response(
            200, headers={"Content-Type": "text/event-stream"}, text=streams.pop(0)
        )

    async with AsyncConvoClient(
        "http://convo.test", transport=httpx.MockTransport(answer)
    ) as client:
        events = await _first(client.tail(after="1-0"), 1)
    assert sent == ["1-0", "5-0"]  # the second stream resumed after the heartbeat's id
    assert [e.checkpoint for e in events] == ["6-1"]


def test_the_reader_follows_the_event_stream_format() -> None:
    reader = EventStreamReader()
    assert reader.line(": heartbeat") is None
    assert reader.line("id: 7-3") is None
    assert reader.line("") is None  # an id without data: no event, a new resume point
    assert reader.last_id == "7-3"
    for line in ("event: x", 'data: {"checkpoint": "8-0", "conversation_id": "c",', "data:"):
        assert reader.line(line) is None
    reader.line('data: "version": 1, "type": "x", "recorded_at": "2026-01-01T00:00:00Z",')
    reader.line('data: "data": {}}')
    event = reader.line("")
    assert event is not None
    assert (event.checkpoint, event.version) == ("8-0", 1)


def _langchain_history(base_url: str, key: str) -> list[str]:
    from langchain_core.messages import AIMessage, HumanMessage

    from store.adapters.langchain import ConvoChatMessageHistory, run_sync

    client = AsyncConvoClient(base_url, api_key=key)
    try:
        # The sync methods run on the adapters' background loop: the client's
        # connections are opened, used and closed there.
        history = ConvoChatMessageHistory("lc", client)
        history.add_messages([HumanMessage("hi"), AIMessage("hello")])
        return [str(m.content) for m in ConvoChatMessageHistory("lc", client).messages]
    finally:
        run_sync(client.aclose())


async def test_a_sync_framework_api_over_a_server(base_url: str, key: str) -> None:
    pytest.importorskip("langchain_core")
    assert await asyncio.to_thread(_langchain_history, base_url, key) == ["hi", "hello"]
