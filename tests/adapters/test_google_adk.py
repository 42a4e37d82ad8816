# mypy: disable-error-code="misc,no-untyped-call,unused-ignore"
"""The Google ADK session service, driven by ADK's own Runner with a
scripted model (no network, no API key), beside ADK's InMemorySessionService.

google-adk needs google-genai 2 where the dev extra tests against 3, so
these tests run in their own virtualenv (`make test-adk`); elsewhere they
are skipped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent
from google.adk.events import Event, EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools import ToolContext
from google.genai import types

from store.adapters.google_adk import (
    ConvoSessionService,
    event_to_message,
    message_to_event,
    session_key,
)
from store.repository import Repository

APP = "weather"


class ScriptedLlm(BaseLlm):
    """Every third turn calls the tool first; then answers from its result."""

    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.calls += 1
        last = llm_request.contents[-1].parts[0] if llm_request.contents else None
        if last is not None and last.function_response is not None:
            text = f"it is {last.function_response.response['result']}"
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        if self.calls % 3 == 1:
            call = types.FunctionCall(
                id=f"call-{self.calls}", name="get_weather", args={"city": "Oslo"}
            )
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )
            return
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=f"answer {self.calls}")])
        )


def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """The weather in a city (and it counts the calls in every scope of state)."""
    tool_context.state["calls"] = tool_context.state.get("calls", 0) + 1
    tool_context.state["user:cities"] = [*tool_context.state.get("user:cities", []), city]
    tool_context.state["app:last_city"] = city
    tool_context.state["temp:scratch"] = "never stored"
    return {"result": f"sunny in {city}"}


def _runner(service: BaseSessionService) -> Runner:
    agent = LlmAgent(
        name="forecaster",
        model=ScriptedLlm(model="scripted"),
        tools=[get_weather],
        output_key="last",
    )
    return Runner(agent=agent, app_name=APP, session_service=service)


def _plain(events: list[Event]) -> list[dict[str, Any]]:
    """Events without what differs between two runs (ids, times)."""
    out = []
    for event in events:
        data = event.model_dump(exclude_none=True, mode="json")
        for key in ("id", "invocation_id", "timestamp"):
            data.pop(key, None)
        out.append(data)
    return out


async def _turns(service: BaseSessionService, user: str, session_id: str) -> list[Event]:
    runner = _runner(service)
    seen = []
    for turn in range(4):
        message = types.Content(role="user", parts=[types.Part(text=f"weather? {turn}")])
        async for event in runner.run_async(
            user_id=user, session_id=session_id, new_message=message
        ):
            seen.append(event)
    return seen


async def test_runner_matches_in_memory_service(repository: Repository) -> None:
    ours, theirs = ConvoSessionService(repository), InMemorySessionService()
    for service in (ours, theirs):
        await service.create_session(
            app_name=APP, user_id="u1", session_id="s1", state={"tone": "dry", "user:lang": "en"}
        )
    seen_ours = await _turns(ours, "u1", "s1")
    seen_theirs = await _turns(theirs, "u1", "s1")
    assert _plain(seen_ours) == _plain(seen_theirs)
    a = await ours.get_session(app_name=APP, user_id="u1", session_id="s1")
    b = await theirs.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert a is not None
    assert b is not None
    assert a.state == b.state
    assert a.state["calls"] == 2
    assert a.state["app:last_city"] == "Oslo"
    assert "temp:scratch" not in a.state
    assert sum(len(e.get_function_calls()) for e in a.events) == 2
    assert _plain(a.events) == _plain(b.events)
    # The events as the runner gave them, ids and times included.
    replies = [e for e in a.events if e.author != "user"]
    assert [e.model_dump() for e in replies] == [e.model_dump() for e in seen_ours]
    # A new service (another process) reads the same session.
    fresh = await ConvoSessionService(repository).get_session(
        app_name=APP, user_id="u1", session_id="s1"
    )
    assert fresh is not None
    assert fresh.events == a.events
    assert fresh.state == a.state
    # User and app state are shared by the user's and the app's other sessions.
    other = await ours.create_session(app_name=APP, user_id="u1", session_id="s2")
    assert other.state["user:cities"] == a.state["user:cities"]
    assert other.state["app:last_city"] == "Oslo"
    assert await ours.get_user_state(app_name=APP, user_id="u1") == {
        "lang": "en",
        "cities": a.state["user:cities"],
    }


async def test_recent_events_and_after_timestamp(repository: Repository) -> None:
    ours, theirs = ConvoSessionService(repository), InMemorySessionService()
    for service in (ours, theirs):
        session = await service.create_session(app_name=APP, user_id="u", session_id="s")
        for i in range(12):
            event = Event(
                invocation_id=f"inv-{i}",
                author="user" if i % 2 == 0 else "forecaster",
                content=types.Content(
                    role="user" if i % 2 == 0 else "model", parts=[types.Part(text=f"m{i}")]
                ),
                timestamp=1000.0 + i,
                actions=EventActions(state_delta={"n": i}),
            )
            await service.append_event(session, event)
    for config in (
        GetSessionConfig(num_recent_events=0),
        GetSessionConfig(num_recent_events=5),
        GetSessionConfig(num_recent_events=50),
        GetSessionConfig(after_timestamp=1007.0),
        GetSessionConfig(num_recent_events=3, after_timestamp=1010.0),
    ):
        a = await ours.get_session(app_name=APP, user_id="u", session_id="s", config=config)
        b = await theirs.get_session(app_name=APP, user_id="u", session_id="s", config=config)
        assert a is not None
        assert b is not None
        assert _plain(a.events) == _plain(b.events), config
        assert a.state == b.state == {"n": 11}


async def test_list_and_delete(repository: Repository) -> None:
    service = ConvoSessionService(repository)
    for user, sid in (("u1", "a"), ("u1", "b"), ("u2", "c")):
        await service.create_session(app_name=APP, user_id=user, session_id=sid)
    await service.create_session(app_name="other", user_id="u1", session_id="a")
    listed = await service.list_sessions(app_name=APP, user_id="u1")
    assert sorted(s.id for s in listed.sessions) == ["a", "b"]
    everyone = await service.list_sessions(app_name=APP)
    assert sorted(s.id for s in everyone.sessions) == ["a", "b", "c"]
    await service.delete_session(app_name=APP, user_id="u1", session_id="a")
    assert await service.get_session(app_name=APP, user_id="u1", session_id="a") is None
    # The id can be used again: a new conversation.
    again = await service.create_session(app_name=APP, user_id="u1", session_id="a")
    assert again.events == []
    assert await service.get_session(app_name="other", user_id="u1", session_id="a") is not None


def test_events_that_do_not_map_are_kept_whole() -> None:
    events = [
        Event(author="forecaster", actions=EventActions(escalate=True, state_delta={"k": 1})),
        Event(
            author="user",
            content=types.Content(
                role="user",
                parts=[types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))],
            ),
        ),
        Event(
            author="forecaster",
            content=types.Content(role="model", parts=[types.Part(text="a", thought=True)]),
        ),
    ]
    for event in events:
        message = event_to_message(event)
        assert message.metadata["convo_adapter"]["kind"] == "opaque"
        assert message_to_event(message) == event


def _call_part(call_id: str, args: dict[str, Any] | None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name="f", args=args))


def _kinds_of_events() -> list[tuple[Event, bool]]:
    """Events of the shapes the service maps, each with whether it is
    rebuilt without validation (False: some of it needs validating)."""
    text = types.Content(role="user", parts=[types.Part(text="hi")])
    answer = types.Content(role="model", parts=[types.Part(text="a"), types.Part(text="b")])
    calls = types.Content(
        role="model",
        parts=[
            types.Part(text="calling"),
            _call_part("c1", {"x": [1, {"y": None}]}),
            _call_part("c2", None),
        ],
    )
    result = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id="c1", name="f", response={"result": {"rows": [1, 2]}}
                )
            )
        ],
    )
    confirmation = {"c1": {"hint": "sure?", "confirmed": False}}
    return [
        (Event(author="user", content=text, timestamp=5), True),
        (Event(invocation_id="i", author="bot", content=answer, branch="a.b"), True),
        (Event(author="bot", content=calls, long_running_tool_ids={"c2", "c1"}), True),
        (Event(author="bot", content=result, actions=EventActions(state_delta={"k": [1]})), True),
        (
            Event(
                author="bot",
                content=answer,
                partial=False,
                custom_metadata={"trace": {"n": 1}},
                actions=EventActions(
                    artifact_delta={"f.txt": 2}, transfer_to_agent="other", escalate=True
                ),
            ),
            True,
        ),
        (
            Event(
                author="bot",
                content=answer,
                usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=3),
            ),
            False,
        ),
        (
            Event(
                author="bot",
                content=calls,
                actions=EventActions.model_validate({"requested_tool_confirmations": confirmation}),
            ),
            False,
        ),
    ]


async def test_events_rebuilt_without_validation_are_the_validated_ones(
    repository: Repository,
) -> None:
    """Events read back are built without ADK's validation when they are
    of the shapes the service itself wrote: the very events validation
    gives (fields, fields set, types), through the store and back."""
    from store.adapters.google_adk import _event_data, _rebuilt

    service = ConvoSessionService(repository)
    session = await service.create_session(app_name=APP, user_id="u", session_id="kinds")
    cases = _kinds_of_events()
    for event, _ in cases:
        await service.append_event(session, event)
    read = await ConvoSessionService(repository).get_session(
        app_name=APP, user_id="u", session_id="kinds"
    )
    assert read is not None
    stored = await repository.read_messages(session_key(APP, "u", "kinds"), limit=100)
    for (event, fast), back, message in zip(cases, read.events, stored, strict=True):
        data = _event_data(message)
        assert (_rebuilt(data) is not None) == fast
        validated = Event.model_validate(data)
        assert back == validated == event
        assert back.model_fields_set == validated.model_fields_set
        for mode in ("python", "json"):
            assert back.model_dump(mode=mode, exclude_unset=True) == validated.model_dump(
                mode=mode, exclude_unset=True
            )
        assert back.model_dump_json() == validated.model_dump_json()


@pytest.mark.slow
async def test_eight_concurrent_writers_lose_nothing(repository: Repository) -> None:
    service = ConvoSessionService(repository)
    await service.create_session(app_name=APP, user_id="u", session_id="busy")

    async def writer(w: int) -> None:
        # Each writer its own session object, read once, as a separate worker.
        session = await service.get_session(app_name=APP, user_id="u", session_id="busy")
        assert session is not None
        for i in range(10):
            content = types.Content(role="user", parts=[types.Part(text=f"w{w} #{i}")])
            await service.append_event(session, Event(author="user", content=content))

    await asyncio.gather(*(writer(w) for w in range(8)))
    session = await service.get_session(app_name=APP, user_id="u", session_id="busy")
    assert session is not None
    texts = [e.content.parts[0].text for e in session.events if e.content and e.content.parts]
    assert sorted(texts) == sorted(f"w{w} #{i}" for w in range(8) for i in range(10))
