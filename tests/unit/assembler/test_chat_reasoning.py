"""Reasoning replay on OpenAI-compatible Chat endpoints (docs/assembler.md,
"Reasoning on Chat endpoints"): `reasoning_content` is accepted on input and
stored as reasoning; `chat_reasoning` sends back the current tool loop's
(default), all of it, or none; the diagnostics say what was done."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from store.assembler import AssembleOptions
from store.assembler.document import DocumentError, read_document
from store.assembler.options import ChatReasoning
from store.domain.messages import CHAT_REASONING, Message, Reasoning
from tests.unit.assembler.builders import FOUR_SLOTS, A, T, U, build


def thinking(text: str, *calls: int) -> Message:
    return A("", *calls, reasoning_content=text) if calls else A("answer", reasoning_content=text)


def chat_messages(history: list[Message], **options: Any) -> list[dict[str, Any]]:
    payload = build(history, format="openai-chat", **options).payload
    return [m for m in payload["messages"] if m["role"] == "assistant"]


def test_reasoning_content_is_stored_as_reasoning_of_the_chat_provider() -> None:
    message = Message.model_validate(
        {"role": "assistant", "content": "hi", "reasoning_content": "let me think"}
    )
    assert message.reasoning == (Reasoning(provider=CHAT_REASONING, text="let me think"),)
    assert "reasoning_content" not in message.model_dump()


def test_an_empty_reasoning_content_stores_nothing() -> None:
    assert Message(role="assistant", content="hi", reasoning_content="").reasoning == ()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"role": "user", "content": "q", "reasoning_content": "x"}, "only assistant"),
        ({"role": "assistant", "content": "a", "reasoning_content": 5}, "must be text"),
        ({"role": "assistant", "content": "a", "reasoning_content": "x" * 1_000_001}, "limit"),
        ({"role": "assistant", "content": "a", "reasoning_content": "a\x00b"}, "NUL"),
    ],
)
def test_a_bad_reasoning_content_is_refused_by_name(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Message.model_validate(fields)


def test_the_current_tool_loop_is_replayed_and_earlier_turns_left_out() -> None:
    history = [
        U("first"),
        thinking("old thought", 1),
        T(1),
        thinking("old answer"),
        U("second"),
        thinking("loop thought 1", 2),
        T(2),
        thinking("loop thought 2", 3),
        T(3),
    ]
    sent = chat_messages(history, slots=FOUR_SLOTS)
    assert [m.get("reasoning_content") for m in sent] == [
        None,
        None,
        "loop thought 1",
        "loop thought 2",
    ]
    replay = build(history, slots=FOUR_SLOTS).diagnostics.reasoning_replay
    assert replay is not None
    assert (replay.mode, replay.replayed, replay.left_out, replay.other_providers) == (
        "current_tool_loop",
        2,
        2,
        0,
    )


def test_all_and_off() -> None:
    history = [U("a"), thinking("t1"), U("b"), thinking("t2", 1), T(1)]
    every = chat_messages(history, chat_reasoning=ChatReasoning.ALL)
    assert [m.get("reasoning_content") for m in every] == ["t1", "t2"]
    none = chat_messages(history, chat_reasoning="off")
    assert all("reasoning_content" not in m for m in none)
    replay = build(history, chat_reasoning="off").diagnostics.reasoning_replay
    assert replay is not None
    assert (replay.replayed, replay.left_out) == (0, 2)


def test_other_providers_reasoning_is_left_out_and_counted() -> None:
    signed = A("hi", reasoning=(Reasoning(provider="anthropic", text="t", signature="s"),))
    sent = chat_messages([U(), signed])
    assert "reasoning_content" not in sent[0]
    replay = build([U(), signed]).diagnostics.reasoning_replay
    assert replay is not None
    assert replay.other_providers == 1


def test_no_reasoning_no_diagnostic_and_other_formats_have_none() -> None:
    assert build([U(), A()]).diagnostics.reasoning_replay is None
    history = [U(), thinking("t", 1), T(1)]
    for format in ("openai-responses", "anthropic", "gemini", "xml-tools"):
        assembly = build(history, format=format)
        assert assembly.diagnostics.reasoning_replay is None
        assert "reasoning_content" not in json.dumps(assembly.payload)


def test_the_option_is_typed() -> None:
    with pytest.raises(ValidationError, match="chat_reasoning"):
        AssembleOptions.model_validate({"chat_reasoning": "sometimes"})


def test_the_assemble_document_takes_reasoning_content() -> None:
    document = {
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "thinking",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ]
    }
    request = read_document(json.dumps(document))
    assert request.messages[1].reasoning == (Reasoning(provider=CHAT_REASONING, text="thinking"),)
    bad = {"messages": [{"role": "user", "content": "q", "reasoning_content": "x"}]}
    with pytest.raises(DocumentError, match=r"messages\[0\].*only assistant"):
        read_document(json.dumps(bad))


def test_the_prefix_fingerprint_follows_the_reasoning_sent() -> None:
    # The same messages before the special block, sent with their reasoning
    # (the loop under way) and then without it (a user message came after).
    first, answer = U("first"), thinking("why")
    during = build([first, answer], slots=FOUR_SLOTS, policy="tail")
    after = build([first, answer, U("next")], slots=FOUR_SLOTS, policy="from_end", n=1)
    assert during.diagnostics.stable_prefix.message_count == (
        after.diagnostics.stable_prefix.message_count
    )
    sent_during = [m for m in during.payload["messages"] if m["role"] == "assistant"]
    sent_after = [m for m in after.payload["messages"] if m["role"] == "assistant"]
    assert sent_during[0]["reasoning_content"] == "why"
    assert "reasoning_content" not in sent_after[0]
    assert (
        during.diagnostics.stable_prefix.fingerprint != after.diagnostics.stable_prefix.fingerprint
    )
    assert during.diagnostics.token_estimate < after.diagnostics.token_estimate
