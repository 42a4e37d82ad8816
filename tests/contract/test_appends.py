"""Contract: appending messages — numbering, roles, tool calls, every
validation error (each names the message and stores nothing), and
idempotent retries."""

from __future__ import annotations

from typing import Any

import pytest

from store.domain.commands import Limits
from store.domain.errors import IdempotencyConflict, InvalidMessage, InvalidOperation
from store.domain.messages import Message, MessageKind, TextPart, ToolCall
from store.repository import Repository
from tests.contract.conftest import (
    RepositoryFactory,
    Snapshot,
    append_texts,
    assistant,
    call,
    roles,
    seqs,
    system,
    tool,
    user,
)


async def test_append_numbers_messages_and_keeps_their_shape(
    repository: Repository, conversation_id: str
) -> None:
    appended = await repository.append_messages(
        conversation_id,
        [
            system("Be brief."),
            {"role": "user", "content": "Find the bug."},
            assistant("", call("c1", "grep", pattern="TODO")),
            tool("c1", "store.py:12"),
            assistant("Found it.", metadata={"model": "m1"}),
        ],
    )

    assert not appended.replayed
    assert appended.version == 6
    assert seqs(appended.messages) == [1, 2, 3, 4, 5]
    assert roles(appended.messages) == ["system", "user", "assistant", "tool", "assistant"]
    assert {m.batch for m in appended.messages} == {1}
    assert [m.kind for m in appended.messages] == [
        MessageKind.OUTPUT,
        MessageKind.INPUT,  # a user message is input typed by a person
        MessageKind.OUTPUT,
        MessageKind.OUTPUT,
        MessageKind.OUTPUT,
    ]
    assert appended.messages[2].tool_calls == (
        ToolCall(id="c1", name="grep", arguments={"pattern": "TODO"}),
    )
    assert appended.messages[3].tool_call_id == "c1"
    assert appended.messages[4].metadata == {"model": "m1"}
    assert all(m.token_estimate and m.token_estimate > 0 for m in appended.messages)
    assert all(m.recorded_at is not None and not m.edited for m in appended.messages)
    assert await repository.visible_window(conversation_id) == list(appended.messages)
    conversation = await repository.get_conversation(conversation_id)
    assert (conversation.version, conversation.next_seq) == (6, 6)


async def test_content_parts_round_trip(repository: Repository, conversation_id: str) -> None:
    parts = (TextPart(text="look:"), {"type": "image", "url": "https://example.com/a.png"})
    appended = await repository.append_messages(
        conversation_id, [{"role": "user", "content": parts}]
    )
    [stored] = await repository.visible_window(conversation_id)
    assert stored == appended.messages[0]
    assert stored.text == "look:"
    assert isinstance(stored.content, tuple)
    assert [p.type for p in stored.content] == ["text", "image"]


async def test_role_ordinals_count_each_role_from_one(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "S", "U", "A", "U", "A")
    await append_texts(repository, conversation_id, "U")

    window = await repository.visible_window(conversation_id)
    assert [(m.role, m.role_ordinal) for m in window] == [
        ("system", 1),
        ("user", 1),
        ("assistant", 1),
        ("user", 2),
        ("assistant", 2),
        ("user", 3),
    ]


async def test_assistant_with_empty_text_and_tool_calls_is_valid(
    repository: Repository, conversation_id: str
) -> None:
    appended = await repository.append_messages(
        conversation_id,
        [
            user("go"),
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "x"}]},
        ],
    )
    assert appended.messages[1].content == ""
    assert [c.id for c in appended.messages[1].tool_calls] == ["c"]


async def test_an_empty_tool_result_is_valid(repository: Repository, conversation_id: str) -> None:
    await repository.append_messages(conversation_id, [assistant("", call("c"))])
    appended = await repository.append_messages(conversation_id, [tool("c", "")])
    assert appended.messages[0].content == ""


async def test_an_empty_append_is_refused(repository: Repository, conversation_id: str) -> None:
    with pytest.raises(InvalidOperation, match="at least one message"):
        await repository.append_messages(conversation_id, [])


# --- validation: each error names the message and stores nothing ------------------


async def _refused(
    repository: Repository,
    conversation_id: str,
    messages: list[Message | dict[str, Any]],
) -> InvalidMessage:
    before = await Snapshot.take(repository, conversation_id)
    with pytest.raises(InvalidMessage) as caught:
        await repository.append_messages(conversation_id, messages)
    assert await Snapshot.take(repository, conversation_id) == before
    return caught.value


async def test_unknown_role_is_refused(repository: Repository, conversation_id: str) -> None:
    error = await _refused(
        repository,
        conversation_id,
        [user("ok"), {"role": "robot", "content": "beep", "client_message_id": "m-2"}],
    )
    assert (error.index, error.client_id) == (1, "m-2")
    assert "role" in error.problem
    assert str(error).startswith("invalid message: message #1 / client id 'm-2': role")


async def test_result_for_a_call_that_does_not_exist_is_refused(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(conversation_id, [user("go")])
    error = await _refused(repository, conversation_id, [tool("ghost")])
    assert error.index == 0
    assert error.problem == (
        "tool result for call 'ghost', which does not exist in agent 'main''s thread"
    )


async def test_result_for_another_agents_call_is_refused(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(
        conversation_id, [assistant("", call("h1"), agent_id="helper")]
    )
    error = await _refused(repository, conversation_id, [user("hm"), tool("h1")])
    assert error.index == 1
    assert "call 'h1'" in error.problem
    assert "agent 'main''s thread" in error.problem
    # In the agent's own thread the same result is fine.
    ok = await repository.append_messages(conversation_id, [tool("h1", agent_id="helper")])
    assert seqs(ok.messages) == [2]


async def test_a_call_answered_twice_is_refused(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(conversation_id, [assistant("", call("c1")), tool("c1")])
    across = await _refused(repository, conversation_id, [tool("c1", "again")])
    assert (across.index, across.problem) == (0, "tool call 'c1' was already answered")

    await repository.append_messages(conversation_id, [assistant("", call("c2"))])
    within = await _refused(repository, conversation_id, [tool("c2"), tool("c2", "again")])
    assert (within.index, within.problem) == (1, "tool call 'c2' was already answered")


async def test_duplicate_tool_call_ids_are_refused(
    repository: Repository, conversation_id: str
) -> None:
    two_calls_one_id = {
        "role": "assistant",
        "tool_calls": [{"id": "d", "name": "a"}, {"id": "d", "name": "b"}],
    }
    in_one_message = await _refused(repository, conversation_id, [user("go"), two_calls_one_id])
    assert in_one_message.index == 1
    assert "duplicate tool call ids in one message: d" in in_one_message.problem

    in_one_append = await _refused(
        repository, conversation_id, [assistant("", call("d")), assistant("", call("d"))]
    )
    assert in_one_append.index == 1
    assert in_one_append.problem == (
        "duplicate tool call id 'd': already used in this conversation"
    )

    await repository.append_messages(conversation_id, [assistant("", call("d")), tool("d")])
    across_appends = await _refused(repository, conversation_id, [assistant("", call("d"))])
    assert across_appends.index == 0
    assert "duplicate tool call id 'd'" in across_appends.problem


@pytest.mark.parametrize(
    "empty",
    [
        {"role": "user", "content": "   "},
        {"role": "assistant", "content": ""},
        {"role": "system", "content": [{"type": "text", "text": " "}]},
    ],
    ids=["user-blank", "assistant-no-calls", "system-blank-part"],
)
async def test_an_empty_message_without_tool_calls_is_refused(
    repository: Repository, conversation_id: str, empty: dict[str, Any]
) -> None:
    error = await _refused(repository, conversation_id, [user("fine"), empty])
    assert error.index == 1
    assert f"empty {empty['role']} message" in error.problem


async def test_a_message_over_the_size_limit_is_refused(
    make_repository: RepositoryFactory,
) -> None:
    repository = make_repository(limits=Limits(max_message_chars=10))
    conversation = await repository.create_conversation()

    ok = await repository.append_messages(conversation.id, [user("x" * 10)])
    assert seqs(ok.messages) == [1]
    error = await _refused(repository, conversation.id, [user("short"), user("y" * 11)])
    assert error.index == 1
    assert error.problem == "content is 11 characters, over the limit of 10"


async def test_an_append_past_the_conversation_limit_is_refused(
    make_repository: RepositoryFactory,
) -> None:
    repository = make_repository(limits=Limits(max_messages_per_conversation=3))
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [user("a"), user("b")])

    with pytest.raises(InvalidOperation, match="holds 2 messages and may hold at most 3"):
        await repository.append_messages(conversation.id, [user("c"), user("d")])
    last = await repository.append_messages(conversation.id, [user("c")])
    assert seqs(last.messages) == [3]
    assert len(await repository.read_messages(conversation.id)) == 3


def test_the_conversation_limit_cannot_exceed_what_a_role_ordinal_holds() -> None:
    with pytest.raises(ValueError, match="max_messages_per_conversation"):
        Limits(max_messages_per_conversation=2**31)


# --- idempotency ------------------------------------------------------------------


async def test_idempotency_key_retry_returns_the_original(
    repository: Repository, conversation_id: str
) -> None:
    batch = [user("hi"), assistant("hello")]
    first = await repository.append_messages(
        conversation_id, batch, expected_version=1, idempotency_key="turn-1"
    )

    # The retry carries the same stale expected version: it is answered,
    # not refused, because the first attempt is what moved the version.
    again = await repository.append_messages(
        conversation_id, batch, expected_version=1, idempotency_key="turn-1"
    )

    assert again.replayed
    assert again.messages == first.messages
    assert again.version == first.version == 3
    assert seqs(await repository.visible_window(conversation_id)) == [1, 2]


async def test_idempotency_key_replay_reports_the_current_version(
    repository: Repository, conversation_id: str
) -> None:
    first = await repository.append_messages(conversation_id, [user("a")], idempotency_key="k")
    await repository.append_messages(conversation_id, [user("b")])

    again = await repository.append_messages(conversation_id, [user("a")], idempotency_key="k")

    assert again.replayed
    assert seqs(again.messages) == seqs(first.messages) == [1]
    assert again.version == 3  # the conversation's version now, not the first answer's


async def test_idempotency_key_with_other_content_conflicts(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(conversation_id, [user("hi")], idempotency_key="turn-1")
    before = await Snapshot.take(repository, conversation_id)

    with pytest.raises(IdempotencyConflict, match="turn-1") as caught:
        await repository.append_messages(conversation_id, [user("bye")], idempotency_key="turn-1")

    assert caught.value.key == "turn-1"
    assert await Snapshot.take(repository, conversation_id) == before


async def test_a_refused_append_does_not_consume_its_key(
    repository: Repository, conversation_id: str
) -> None:
    with pytest.raises(InvalidMessage):
        await repository.append_messages(conversation_id, [tool("ghost")], idempotency_key="k")
    appended = await repository.append_messages(conversation_id, [user("ok")], idempotency_key="k")
    assert not appended.replayed
    assert seqs(appended.messages) == [1]


async def test_client_message_id_retry_returns_the_original(
    repository: Repository, conversation_id: str
) -> None:
    batch = [user("hi", client_message_id="m1"), assistant("hello", client_message_id="m2")]
    first = await repository.append_messages(conversation_id, batch)

    again = await repository.append_messages(conversation_id, batch, expected_version=1)

    assert again.replayed
    assert again.messages == first.messages
    assert again.version == 3
    assert (await repository.get_conversation(conversation_id)).version == 3


@pytest.fixture
async def m1_stored(repository: Repository, conversation_id: str) -> Snapshot:
    """The conversation after "hi" was stored as client message `m1`."""
    await repository.append_messages(conversation_id, [user("hi", client_message_id="m1")])
    return await Snapshot.take(repository, conversation_id)


async def test_client_message_id_with_other_content_conflicts(
    repository: Repository, conversation_id: str, m1_stored: Snapshot
) -> None:
    before = m1_stored

    with pytest.raises(IdempotencyConflict, match="m1"):
        await repository.append_messages(conversation_id, [user("bye", client_message_id="m1")])
    assert await Snapshot.take(repository, conversation_id) == before


async def test_a_partly_stored_retry_conflicts(
    repository: Repository, conversation_id: str, m1_stored: Snapshot
) -> None:
    before = m1_stored

    with pytest.raises(IdempotencyConflict, match="already stored and others are not"):
        await repository.append_messages(
            conversation_id,
            [user("hi", client_message_id="m1"), user("new", client_message_id="m2")],
        )
    with pytest.raises(IdempotencyConflict):
        await repository.append_messages(
            conversation_id, [user("hi", client_message_id="m1"), user("no id")]
        )
    assert await Snapshot.take(repository, conversation_id) == before


async def test_a_client_message_id_is_used_once(
    repository: Repository, conversation_id: str, m1_stored: Snapshot
) -> None:
    before = m1_stored

    with pytest.raises(IdempotencyConflict):  # twice in one append
        await repository.append_messages(
            conversation_id,
            [user("a", client_message_id="m2"), user("b", client_message_id="m2")],
        )
    with pytest.raises(IdempotencyConflict):  # a key skips the replay check, not the rule
        await repository.append_messages(
            conversation_id, [user("hi", client_message_id="m1")], idempotency_key="k"
        )
    with pytest.raises(IdempotencyConflict):  # inserted messages too
        await repository.insert(conversation_id, 0, [user("x", client_message_id="m1")])
    assert await Snapshot.take(repository, conversation_id) == before


async def test_a_retry_of_a_message_carrying_its_token_estimate_is_replayed(
    repository: Repository, conversation_id: str
) -> None:
    message = user("hi", client_message_id="m1", token_estimate=7)
    first = await repository.append_messages(conversation_id, [message])

    again = await repository.append_messages(conversation_id, [message])

    assert again.replayed
    assert again.messages == first.messages


async def test_messages_can_be_passed_by_keyword(
    repository: Repository,
    conversation_id: str,
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    appended = await repository.append_messages(conversation_id, messages=[user("hi")])
    assert seqs(appended.messages) == [1]
    inserted = await repository.insert(conversation_id, 0, messages=[user("first")])
    assert inserted.visible == 2
