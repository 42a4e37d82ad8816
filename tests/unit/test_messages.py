"""Message rules that one message can check alone, and thread rules."""

from __future__ import annotations

import pytest

from store.domain.errors import InvalidMessage
from store.domain.messages import Message, MessageKind, ToolCall
from store.domain.validation import CallState, parse_message, validate_append


def test_an_assistant_with_empty_text_and_tool_calls_is_valid() -> None:
    message = Message(role="assistant", content="", tool_calls=(ToolCall(id="1", name="ls"),))
    assert message.is_empty
    assert message.tool_calls


def test_user_messages_are_input_by_default_others_output() -> None:
    assert Message(role="user", content="hi").kind is MessageKind.INPUT
    assert Message(role="assistant", content="hi").kind is MessageKind.OUTPUT
    assert Message(role="system", content="x", kind="reminder").kind is MessageKind.REMINDER


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"role": "robot", "content": "x"}, "role"),
        ({"role": "user", "content": "   "}, "empty user message"),
        ({"role": "tool", "content": "x"}, "needs the 'tool_call_id'"),
        ({"role": "user", "content": "x", "tool_call_id": "1"}, "only tool messages"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "1", "name": "a"}, {"id": "1", "name": "b"}],
            },
            "duplicate tool call ids",
        ),
        ({"role": "user", "content": [{"type": "image"}]}, "exactly one of 'url' or 'data'"),
    ],
)
def test_bad_messages_get_an_error_naming_message_and_problem(
    raw: dict[str, object], problem: str
) -> None:
    with pytest.raises(InvalidMessage, match="message #3") as caught:
        parse_message({**raw, "client_message_id": "m-9"}, 3)
    assert problem in str(caught.value)
    assert "m-9" in str(caught.value)


def test_thread_rules() -> None:
    calls = {
        "c1": CallState(agent_id="main", answered=False),
        "c2": CallState(agent_id="main", answered=True),
    }

    def check(*messages: Message) -> None:
        validate_append(messages, known_calls=calls, max_chars=50)

    check(Message(role="tool", tool_call_id="c1", content="ok"))
    with pytest.raises(InvalidMessage, match="does not exist"):
        check(Message(role="tool", tool_call_id="nope", content="ok"))
    with pytest.raises(InvalidMessage, match="agent 'helper'"):
        check(Message(role="tool", tool_call_id="c1", content="ok", agent_id="helper"))
    with pytest.raises(InvalidMessage, match="already answered"):
        check(Message(role="tool", tool_call_id="c2", content="ok"))
    with pytest.raises(InvalidMessage, match="already used"):
        check(Message(role="assistant", tool_calls=(ToolCall(id="c1", name="x"),)))
    with pytest.raises(InvalidMessage, match="over the limit of 50"):
        check(Message(role="user", content="x" * 51))
    # A call and its result in one append are fine; answering twice is not.
    fresh = Message(role="assistant", tool_calls=(ToolCall(id="c9", name="x"),))
    check(fresh, Message(role="tool", tool_call_id="c9", content="r"))
    with pytest.raises(InvalidMessage, match="#2"):
        check(
            fresh,
            Message(role="tool", tool_call_id="c9", content="r"),
            Message(role="tool", tool_call_id="c9", content="r"),
        )
