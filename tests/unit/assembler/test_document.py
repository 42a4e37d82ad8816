"""Reading the `convo assemble` input document."""

from __future__ import annotations

import json
from typing import Any

import pytest

from store.assembler.document import DocumentError, read_document
from store.domain.messages import ImagePart, MessageKind


def doc(**parts: Any) -> str:
    return json.dumps(parts)


def test_openai_chat_shaped_messages_are_read() -> None:
    request = read_document(
        doc(
            messages=[
                {"role": "system", "content": "prompt"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "see"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": '{"p": 1}'},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "ls", "arguments": {"p": 2}},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "system", "content": "r", "kind": "reminder", "agent": "main"},
            ],
            agent={"id": "main", "role_definition": "role"},
        )
    )
    assert request.profile.system_prompt == "prompt"
    assert request.profile.role_definition == "role"
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "system"]
    assert request.messages[0].content[1] == ImagePart(data="aGk=", media_type="image/png")
    assert [c.arguments for c in request.messages[1].tool_calls] == [{"p": 1}, {"p": 2}]
    assert request.messages[3].kind is MessageKind.REMINDER


def test_agent_system_prompt_wins_over_a_first_system_message() -> None:
    request = read_document(
        doc(messages=[{"role": "system", "content": "m"}], agent={"system_prompt": "a"})
    )
    assert request.profile.system_prompt == "a"
    assert [m.role for m in request.messages] == ["system"]


def test_slots_and_custom_slots() -> None:
    request = read_document(
        doc(
            slots={
                "todo": [{"id": "1", "content": "c", "status": "in_progress"}],
                "useful_info": "u",
                "plan": "p",
            }
        )
    )
    assert request.slots.todo[0].status == "in_progress"
    assert request.slots.custom == {"plan": "p"}


def test_options_and_overrides() -> None:
    request = read_document(doc(options={"policy": "tail", "n": 2}), overrides={"n": 4})
    assert (request.options.policy.value, request.options.n) == ("tail", 4)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "input is not valid JSON"),
        ("[]", "the document must be a JSON object"),
        (doc(messages=[{"role": "robot"}]), "messages[0]: role"),
        (
            doc(
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{"}}],
                    }
                ]
            ),
            "messages[0].tool_calls[0].function: arguments are not valid JSON",
        ),
        (
            doc(slots={"todo": [{"id": "1", "content": "c", "status": "later"}]}),
            "slots.todo[0]: status",
        ),
        (doc(slots={"plan": 3}), "slots.plan must be text"),
        (doc(options={"policy": "middle"}), "policy"),
        (doc(options={"token_counter": "x"}), "token_counter"),
    ],
)
def test_problems_are_one_line_and_name_where(text: str, problem: str) -> None:
    with pytest.raises(DocumentError) as raised:
        read_document(text)
    assert problem in str(raised.value)
