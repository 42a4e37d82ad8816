"""Contract: batches and context operations (behaviours §4) — start_batch,
truncate, filter, clear, insert, replace, rollback — and reading any batch
as it was."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from store.domain.commands import Limits
from store.domain.conversation_keys import conversation_key, stream_id
from store.domain.errors import BoundaryError, InvalidMessage, InvalidOperation
from store.domain.messages import MAIN_AGENT, MessageKind, TextPart
from store.repository import BatchResult, Repository
from tests.contract.conftest import (
    RepositoryFactory,
    Snapshot,
    append_texts,
    assistant,
    call,
    seqs,
    system,
    tool,
    user,
)


async def _window(repository: Repository, conversation_id: str) -> list[int]:
    return seqs(await repository.visible_window(conversation_id))


# --- start_batch -----------------------------------------------------------------


async def test_start_batch_shows_the_window_from_the_boundary_on(
    repository: Repository, conversation_id: str
) -> None:
    first_window = await append_texts(repository, conversation_id, "U", "A", "U", "A", "U", "A")

    result = await repository.start_batch(conversation_id, 5)

    assert result == BatchResult(conversation_id=conversation_id, version=8, batch=2, visible=2)
    assert await _window(repository, conversation_id) == [5, 6]
    [_, second] = await repository.batches(conversation_id)
    assert (second.number, second.boundary, second.summary_seq, second.retained) == (
        2,
        Decimal(5),
        None,
        (),
    )
    assert (second.operation, second.parameters) == (
        "start_batch",
        {"boundary_seq": 5, "retain": []},
    )
    appended = await repository.append_messages(conversation_id, [user("next")])
    assert [(m.seq, m.batch) for m in appended.messages] == [(7, 2)]
    assert await _window(repository, conversation_id) == [5, 6, 7]
    assert await repository.visible_window(conversation_id, batch=1) == first_window
    assert (await repository.get_conversation(conversation_id)).current_batch == 2


async def test_start_batch_with_a_summary_shows_it_first(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A", "U", "A")

    result = await repository.start_batch(
        conversation_id, 5, summary=assistant("Earlier: two questions, answered.")
    )

    assert (result.version, result.batch, result.visible) == (9, 2, 3)
    window = await repository.visible_window(conversation_id)
    assert seqs(window) == [7, 5, 6]
    summary = window[0]
    assert (summary.kind, summary.role, summary.batch) == (MessageKind.SUMMARY, "assistant", 2)
    assert summary.text == "Earlier: two questions, answered."
    assert (await repository.batches(conversation_id))[-1].summary_seq == 7
    assert await repository.batch_messages(conversation_id, 2) == [summary]


async def test_start_batch_retains_chosen_earlier_messages(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "S", "U", "A", "U", "A", "U")

    await repository.start_batch(conversation_id, 5, retain=[1, 2], summary=user("summary"))

    assert await _window(repository, conversation_id) == [1, 2, 7, 5, 6]
    assert (await repository.batches(conversation_id))[-1].retained == (1, 2)
    before = await Snapshot.take(repository, conversation_id)
    with pytest.raises(InvalidOperation, match=r"not visible: seq \[3\]"):
        await repository.start_batch(conversation_id, 6, retain=[3])
    assert await Snapshot.take(repository, conversation_id) == before


async def test_start_batch_refuses_to_split_a_tool_block(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(
        conversation_id,
        [user("go"), assistant("", call("c1")), tool("c1"), user("thanks"), assistant("welcome")],
    )
    before = await Snapshot.take(repository, conversation_id)

    with pytest.raises(BoundaryError, match="split the tool-call block of message seq 2"):
        await repository.start_batch(conversation_id, 3)
    assert await Snapshot.take(repository, conversation_id) == before

    moved = await repository.start_batch(conversation_id, 3, adjust=True)
    assert (moved.batch, moved.visible) == (2, 4)
    assert await _window(repository, conversation_id) == [2, 3, 4, 5]
    assert (await repository.batches(conversation_id))[-1].boundary == Decimal(2)


async def test_start_batch_refuses_to_hide_a_pending_call(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(conversation_id, [user("go"), assistant("", call("c1"))])
    before = await Snapshot.take(repository, conversation_id)

    with pytest.raises(BoundaryError, match=r"c1 \(message seq 2\) still waiting for a result"):
        await repository.start_batch(conversation_id, 3)
    assert await Snapshot.take(repository, conversation_id) == before

    kept = await repository.start_batch(conversation_id, 3, adjust=True)
    assert kept.visible == 1
    assert await _window(repository, conversation_id) == [2]
    await repository.append_messages(conversation_id, [tool("c1")])
    assert await _window(repository, conversation_id) == [2, 3]


# --- truncate, filter, clear -------------------------------------------------------

TRUNCATIONS: list[tuple[dict[str, Any], list[int], dict[str, Any]]] = [
    ({"keep_first": 2}, [1, 2], {"keep_first": 2}),
    ({"keep_last": 2}, [5, 6], {"keep_last": 2}),
    ({"keep_last": 0}, [], {"keep_last": 0}),
    ({"remove_first": 2}, [3, 4, 5, 6], {"remove_first": 2}),
    ({"remove_last": 2}, [1, 2, 3, 4], {"remove_last": 2}),
    ({"range_": (1, 3)}, [2, 3], {"range": [1, 3]}),
    ({"keep_last": 1, "role": "user"}, [2, 4, 5, 6], {"keep_last": 1, "role": "user"}),
    (
        {"remove_first": 2, "role": "assistant"},
        [1, 3, 5, 6],
        {"remove_first": 2, "role": "assistant"},
    ),
]


@pytest.mark.parametrize(
    ("arguments", "shown", "recorded"),
    TRUNCATIONS,
    ids=[
        "keep_first",
        "keep_last",
        "keep_none",
        "remove_first",
        "remove_last",
        "range",
        "user-keep_last",
        "assistant-remove_first",
    ],
)
async def test_truncate(
    repository: Repository,
    conversation_id: str,
    arguments: dict[str, Any],
    shown: list[int],
    recorded: dict[str, Any],
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A", "U", "A")

    result = await repository.truncate(conversation_id, **arguments)

    assert (result.version, result.batch, result.visible) == (8, 2, len(shown))
    assert await _window(repository, conversation_id) == shown
    batch = (await repository.batches(conversation_id))[-1]
    assert (batch.operation, batch.parameters) == ("truncate", recorded)


@pytest.mark.parametrize(
    "arguments",
    [{}, {"keep_last": -1}, {"range_": (3, 1)}, {"keep_first": 1, "role": "robot"}],
    ids=["nothing", "negative", "reversed-range", "unknown-role"],
)
async def test_truncate_refuses_bad_arguments(
    repository: Repository, conversation_id: str, arguments: dict[str, Any]
) -> None:
    await append_texts(repository, conversation_id, "U", "A")
    before = await Snapshot.take(repository, conversation_id)
    with pytest.raises(InvalidOperation):
        await repository.truncate(conversation_id, **arguments)
    assert await Snapshot.take(repository, conversation_id) == before


async def test_truncate_keeps_tool_blocks_whole(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(
        conversation_id, [user("go"), assistant("", call("c1")), tool("c1"), user("more")]
    )
    with pytest.raises(BoundaryError, match="split"):
        await repository.truncate(conversation_id, keep_last=0, role="tool")
    await repository.truncate(conversation_id, keep_last=0, role="tool", adjust=True)
    assert await _window(repository, conversation_id) == [1, 2, 3, 4]


FILTERS: list[tuple[dict[str, Any], list[int]]] = [
    ({"roles": ["user"]}, [2, 4]),
    ({"content_contains": ["world"]}, [2, 4]),
    ({"content_contains": ["hello", "ok"]}, [2, 5]),
    ({"content_excludes": ["world"]}, [1, 3, 5]),
    ({"roles": ["user", "assistant"], "content_excludes": ["bye"]}, [2, 3, 5]),
]


@pytest.mark.parametrize(
    ("arguments", "shown"),
    FILTERS,
    ids=["roles", "contains", "contains-any", "excludes", "roles-and-excludes"],
)
async def test_filter(
    repository: Repository,
    conversation_id: str,
    arguments: dict[str, Any],
    shown: list[int],
) -> None:
    await repository.append_messages(
        conversation_id,
        [
            system("rules"),
            user("hello world"),
            assistant("greeting back"),
            user("bye world"),
            assistant("ok"),
        ],
    )

    result = await repository.filter(conversation_id, **arguments)

    assert (result.batch, result.visible) == (2, len(shown))
    assert await _window(repository, conversation_id) == shown
    assert (await repository.batches(conversation_id))[-1].operation == "filter"


async def test_filter_refuses_bad_arguments(repository: Repository, conversation_id: str) -> None:
    await append_texts(repository, conversation_id, "U")
    with pytest.raises(InvalidOperation, match="needs roles"):
        await repository.filter(conversation_id)
    with pytest.raises(InvalidOperation, match="unknown roles"):
        await repository.filter(conversation_id, roles=["robot"])  # type: ignore[list-item]
    assert (await repository.get_conversation(conversation_id)).current_batch == 1


async def test_clear_keeps_system_messages_visible(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(
        conversation_id,
        [system("rules"), user("hi"), assistant("hello"), system("TODO changed", kind="reminder")],
    )

    result = await repository.clear(conversation_id)

    assert (result.batch, result.visible) == (2, 2)
    assert await _window(repository, conversation_id) == [1, 4]
    assert await repository.count_by_role(conversation_id) == {
        "system": 2,
        "user": 0,
        "assistant": 0,
        "tool": 0,
    }
    await repository.append_messages(conversation_id, [user("again")])
    assert await _window(repository, conversation_id) == [1, 4, 5]


async def test_clear_everything(repository: Repository, conversation_id: str) -> None:
    await repository.append_messages(conversation_id, [system("rules"), user("hi")])

    result = await repository.clear(conversation_id, keep_system=False)

    assert (result.batch, result.visible) == (2, 0)
    assert await repository.visible_window(conversation_id) == []
    assert (await repository.batches(conversation_id))[-1].parameters == {"keep_system": False}


async def test_clear_refuses_to_hide_a_pending_call(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(conversation_id, [user("go"), assistant("", call("c1"))])
    with pytest.raises(BoundaryError, match="still waiting"):
        await repository.clear(conversation_id)
    await repository.clear(conversation_id, adjust=True)
    assert await _window(repository, conversation_id) == [2]


# --- insert ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("position", "shown"),
    [(0, [5, 6, 1, 2, 3, 4]), (2, [1, 2, 5, 6, 3, 4]), (4, [1, 2, 3, 4, 5, 6])],
    ids=["start", "middle", "end"],
)
async def test_insert_places_messages_at_a_position(
    repository: Repository, conversation_id: str, position: int, shown: list[int]
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A")

    result = await repository.insert(
        conversation_id, position, [user("inserted 1"), assistant("inserted 2")]
    )

    assert result == BatchResult(conversation_id=conversation_id, version=8, batch=2, visible=6)
    window = await repository.visible_window(conversation_id)
    assert seqs(window) == shown
    # The log stays append-only: inserted messages take the next seqs.
    inserted = [m for m in window if m.seq >= 5]
    assert [(m.text, m.batch) for m in inserted] == [("inserted 1", 2), ("inserted 2", 2)]
    batch = (await repository.batches(conversation_id))[-1]
    assert (batch.operation, batch.parameters) == ("insert", {"position": position, "count": 2})
    await repository.append_messages(conversation_id, [user("after")])
    assert await _window(repository, conversation_id) == [*shown, 7]


async def test_insert_next_to_a_hidden_message(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.filter(conversation_id, content_excludes=["A2"])
    assert await _window(repository, conversation_id) == [1, 3, 4]

    await repository.insert(conversation_id, 1, [user("between 1 and 3")])
    assert await _window(repository, conversation_id) == [1, 5, 3, 4]

    await repository.rollback_to_batch(conversation_id, 1)
    assert await _window(repository, conversation_id) == [1, 2, 3, 4]


async def test_insert_refuses_a_position_inside_a_tool_block(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(
        conversation_id, [user("go"), assistant("", call("c1")), tool("c1")]
    )
    before = await Snapshot.take(repository, conversation_id)

    with pytest.raises(InvalidOperation, match="position 2 is inside a tool-call block"):
        await repository.insert(conversation_id, 2, [user("wedged")])
    assert await Snapshot.take(repository, conversation_id) == before


async def test_insert_refuses_a_position_after_a_pending_call(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(conversation_id, [user("go"), assistant("", call("c1"))])
    with pytest.raises(InvalidOperation):
        await repository.insert(conversation_id, 2, [user("wedged")])


async def test_insert_refuses_bad_requests(repository: Repository, conversation_id: str) -> None:
    await repository.append_messages(conversation_id, [user("go"), assistant("", call("c1"))])
    before = await Snapshot.take(repository, conversation_id)

    with pytest.raises(InvalidMessage, match="cannot be inserted"):
        await repository.insert(conversation_id, 0, [tool("c1")])
    with pytest.raises(InvalidMessage, match="cannot be inserted"):
        await repository.insert(conversation_id, 0, [assistant("", call("c2"))])
    with pytest.raises(InvalidOperation, match=r"outside the window \(0..2\)"):
        await repository.insert(conversation_id, 3, [user("far")])
    with pytest.raises(InvalidOperation, match="outside the window"):
        await repository.insert(conversation_id, -1, [user("far")])
    with pytest.raises(InvalidOperation, match="at least one message"):
        await repository.insert(conversation_id, 0, [])
    assert await Snapshot.take(repository, conversation_id) == before


# --- replace -----------------------------------------------------------------------


async def test_replace_edits_a_message_in_place(
    repository: Repository, conversation_id: str
) -> None:
    [original, _] = await append_texts(repository, conversation_id, "U", "A")

    version = await repository.replace(conversation_id, 1, "edited question")

    assert version == 4
    [edited, answer] = await repository.visible_window(conversation_id)
    assert (edited.content, edited.edited) == ("edited question", True)
    assert (edited.seq, edited.batch, edited.role_ordinal) == (1, 1, 1)
    assert edited.recorded_at == original.recorded_at
    assert not answer.edited
    assert (await repository.get_conversation(conversation_id)).current_batch == 1
    # Batch operations see the new text.
    await repository.filter(conversation_id, content_contains=["edited"])
    assert await _window(repository, conversation_id) == [1]


async def test_replace_with_content_parts(repository: Repository, conversation_id: str) -> None:
    await append_texts(repository, conversation_id, "U")
    await repository.replace(conversation_id, 1, (TextPart(text="as parts"),))
    [edited] = await repository.visible_window(conversation_id)
    assert edited.content == (TextPart(text="as parts"),)
    assert edited.text == "as parts"


async def test_replace_refuses_what_would_change_nothing_or_break_a_rule(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A")
    before = await Snapshot.take(repository, conversation_id)

    with pytest.raises(InvalidOperation, match="would not change message 1: same content"):
        await repository.replace(conversation_id, 1, "U1")
    with pytest.raises(InvalidOperation, match="no message with seq 9"):
        await repository.replace(conversation_id, 9, "x")
    with pytest.raises(InvalidMessage):
        await repository.replace(conversation_id, 1, "  ")
    assert await Snapshot.take(repository, conversation_id) == before


async def test_a_refused_replace_names_the_problem(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U")
    with pytest.raises(InvalidMessage, match="empty user message"):
        await repository.replace(conversation_id, 1, "  ")


async def test_replace_refuses_content_over_the_size_limit(
    make_repository: RepositoryFactory,
) -> None:
    repository = make_repository(limits=Limits(max_message_chars=10))
    conversation = await repository.create_conversation()
    await repository.append_messages(conversation.id, [user("short")])
    with pytest.raises(InvalidMessage, match="over the limit of 10"):
        await repository.replace(conversation.id, 1, "x" * 50)


async def test_replace_updates_the_token_estimate(
    repository: Repository, conversation_id: str
) -> None:
    [original] = await append_texts(repository, conversation_id, "U")
    await repository.replace(conversation_id, 1, "a much longer question " * 20)
    [edited] = await repository.visible_window(conversation_id)
    assert edited.token_estimate is not None
    assert original.token_estimate is not None
    assert edited.token_estimate > original.token_estimate
    # The payload's input holds the edit's content and estimate too.
    found = await repository.storage.assembly_input(
        stream_id(repository.tenant, conversation_key(conversation_id)),
        repository.tenant,
        MAIN_AGENT,
    )
    [message] = found.window.messages()
    assert (message.content, message.token_estimate) == (edited.content, edited.token_estimate)


async def test_edits_of_carried_messages_reach_the_window_and_its_payload(
    repository: Repository, conversation_id: str
) -> None:
    # A carried member's edit is read from the member's own row on
    # PostgreSQL (migration 0021): made before the batch operation, it is
    # copied with the member; made after, it is followed there.
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.replace(conversation_id, 4, "the answer, edited before")
    await repository.start_batch(conversation_id, 3)  # batch 2 carries [3, 4]
    await repository.replace(conversation_id, 3, "the question, edited after")
    window = await repository.visible_window(conversation_id)
    assert [(m.seq, m.content, m.edited) for m in window] == [
        (3, "the question, edited after", True),
        (4, "the answer, edited before", True),
    ]
    payload = (await repository.assemble(conversation_id, format="openai-chat")).payload
    assert [m["content"] for m in payload["messages"]] == [
        "the question, edited after",
        "the answer, edited before",
    ]


# --- rollback and reading older batches --------------------------------------------


async def test_rollback_to_batch_shows_that_batch_as_it_was(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.start_batch(conversation_id, 3)  # batch 2: [3, 4]
    await append_texts(repository, conversation_id, "U")  # joins batch 2
    await repository.start_batch(conversation_id, 5)  # batch 3: [5]
    await append_texts(repository, conversation_id, "A")  # joins batch 3

    result = await repository.rollback_to_batch(conversation_id, 2)

    assert (result.batch, result.visible) == (4, 3)
    assert await _window(repository, conversation_id) == [3, 4, 5]  # not 6: batch 3's
    batch = (await repository.batches(conversation_id))[-1]
    assert (batch.operation, batch.parameters) == ("rollback_to_batch", {"batch": 2})

    await repository.rollback_to_batch(conversation_id, 1)
    assert await _window(repository, conversation_id) == [1, 2, 3, 4]
    await append_texts(repository, conversation_id, "U")
    assert await _window(repository, conversation_id) == [1, 2, 3, 4, 7]
    assert seqs(await repository.visible_window(conversation_id, batch=2)) == [3, 4, 5]
    assert seqs(await repository.visible_window(conversation_id, batch=3)) == [5, 6]


async def test_rollback_to_a_batch_that_does_not_exist_is_refused(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U")
    for batch in (0, 2, 9):
        with pytest.raises(InvalidOperation, match=f"no batch {batch}"):
            await repository.rollback_to_batch(conversation_id, batch)
    assert len(await repository.batches(conversation_id)) == 1


async def test_rollback_refuses_to_hide_a_pending_call(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A")
    await repository.start_batch(conversation_id, 2)  # batch 2: [2]
    await repository.append_messages(conversation_id, [assistant("", call("c1"))])
    with pytest.raises(BoundaryError):
        await repository.rollback_to_batch(conversation_id, 1)  # [1, 2]: c1 hidden


async def test_older_batches_read_as_they_were(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "S", "U", "A", "U", "A")
    operations: list[Any] = [
        lambda: repository.truncate(conversation_id, remove_first=1, role="user"),
        lambda: repository.insert(conversation_id, 1, [user("inserted")]),
        lambda: repository.start_batch(conversation_id, 4, summary=user("summary"), retain=[1]),
        lambda: repository.append_messages(conversation_id, [user("later")]),
        lambda: repository.filter(conversation_id, roles=["user", "system"]),
        lambda: repository.clear(conversation_id),
        lambda: repository.rollback_to_batch(conversation_id, 3),
    ]
    seen = {1: await repository.visible_window(conversation_id)}
    for operation in operations:
        await operation()
        current = (await repository.get_conversation(conversation_id)).current_batch
        seen[current] = await repository.visible_window(conversation_id)

    assert sorted(seen) == [1, 2, 3, 4, 5, 6, 7]
    for number, window in seen.items():
        assert await repository.visible_window(conversation_id, batch=number) == window
    assert seqs(seen[6]) == [1]  # clear kept the system message
    assert seqs(seen[7]) == seqs(seen[3])
    assert await repository.visible_window(conversation_id, batch=99) == []


async def test_batch_messages_are_those_appended_in_the_batch(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A")
    await repository.start_batch(conversation_id, 2, summary=assistant("summary"))  # 3
    await append_texts(repository, conversation_id, "U")  # 4
    await repository.insert(conversation_id, 0, [user("inserted")])  # 5, batch 3

    assert seqs(await repository.batch_messages(conversation_id, 1)) == [1, 2]
    assert seqs(await repository.batch_messages(conversation_id, 2)) == [3, 4]
    assert seqs(await repository.batch_messages(conversation_id, 3)) == [5]
    assert await repository.batch_messages(conversation_id, 9) == []


async def test_batches_lists_every_window_in_order(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A")
    await repository.start_batch(conversation_id, 2)
    await repository.truncate(conversation_id, keep_last=2)
    await repository.rollback_to_batch(conversation_id, 1)

    batches = await repository.batches(conversation_id)

    assert [b.number for b in batches] == [1, 2, 3, 4]
    assert [b.operation for b in batches] == [
        "conversation_started",
        "start_batch",
        "truncate",
        "rollback_to_batch",
    ]
    first = batches[0]
    assert (first.boundary, first.retained, first.summary_seq, first.parameters) == (
        Decimal(0),
        (),
        None,
        {},
    )
    assert [b.boundary for b in batches[1:]] == [Decimal(2), Decimal(3), Decimal(1)]
    started = [b.started_at for b in batches]
    assert started == sorted(started)
    assert all(t.tzinfo is not None for t in started)
