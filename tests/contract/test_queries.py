"""Contract: by-role queries (recent N, ordinal ranges, counts), tool blocks,
and the scoping of sub-agents' messages and tool threads."""

from __future__ import annotations

import pytest

from store.domain.errors import InvalidOperation
from store.repository import Repository, ToolBlock
from tests.contract.conftest import append_texts, assistant, call, seqs, tool, user


async def _hide_the_first_four(repository: Repository, conversation_id: str) -> None:
    """U1 A2 U3 A4 U5 A6, of which only U5 A6 stay visible."""
    await append_texts(repository, conversation_id, "U", "A", "U", "A", "U", "A")
    await repository.truncate(conversation_id, keep_last=2)


async def test_recent_by_role_over_the_visible_window(
    repository: Repository, conversation_id: str
) -> None:
    await append_texts(repository, conversation_id, "U", "A", "U", "A", "U", "A")
    assert seqs(await repository.recent_by_role(conversation_id, "user", 2)) == [3, 5]
    assert seqs(await repository.recent_by_role(conversation_id, "assistant", 9)) == [2, 4, 6]
    assert seqs(await repository.recent_by_role(conversation_id, "assistant", 4)) == [2, 4, 6]
    assert await repository.recent_by_role(conversation_id, "user", 0) == []
    assert await repository.recent_by_role(conversation_id, "tool", 3) == []

    await repository.truncate(conversation_id, keep_last=2)

    # Hidden messages never come back in the visible scope (the source
    # SDK's "recent N" returned them).
    assert seqs(await repository.recent_by_role(conversation_id, "user", 3)) == [5]
    assert seqs(await repository.recent_by_role(conversation_id, "assistant", 3)) == [6]


async def test_recent_by_role_over_the_history(
    repository: Repository, conversation_id: str
) -> None:
    await _hide_the_first_four(repository, conversation_id)

    recent = await repository.recent_by_role(conversation_id, "user", 2, scope="history")
    assert seqs(recent) == [3, 5]
    assert [m.text for m in recent] == ["U3", "U5"]
    everything = await repository.recent_by_role(conversation_id, "user", 10, scope="history")
    assert seqs(everything) == [1, 3, 5]
    assert await repository.recent_by_role(conversation_id, "user", 0, scope="history") == []


async def test_recent_by_role_needs_a_non_negative_count(
    repository: Repository, conversation_id: str
) -> None:
    with pytest.raises(InvalidOperation, match="n >= 0"):
        await repository.recent_by_role(conversation_id, "user", -1)


async def test_role_range_is_one_based_and_inclusive(
    repository: Repository, conversation_id: str
) -> None:
    await _hide_the_first_four(repository, conversation_id)

    # Ordinals count the whole history, hidden messages included.
    assert seqs(await repository.role_range(conversation_id, "assistant", 2, 3)) == [4, 6]
    assert seqs(await repository.role_range(conversation_id, "user", 1, 1)) == [1]
    assert seqs(await repository.role_range(conversation_id, "user", 1, 3)) == [1, 3, 5]
    assert seqs(await repository.role_range(conversation_id, "user", 3, 10)) == [5]
    assert await repository.role_range(conversation_id, "user", 4, 5) == []
    second_and_third = await repository.role_range(conversation_id, "user", 2, 3)
    assert [m.role_ordinal for m in second_and_third] == [2, 3]


@pytest.mark.parametrize(("first", "last"), [(0, 2), (3, 2), (-1, 1)])
async def test_role_range_refuses_a_bad_range(
    repository: Repository, conversation_id: str, first: int, last: int
) -> None:
    with pytest.raises(InvalidOperation, match="1 <= first <= last"):
        await repository.role_range(conversation_id, "user", first, last)


async def test_count_by_role_in_both_scopes(repository: Repository, conversation_id: str) -> None:
    assert await repository.count_by_role(conversation_id) == {
        "system": 0,
        "user": 0,
        "assistant": 0,
        "tool": 0,
    }
    await append_texts(repository, conversation_id, "S")
    await repository.append_messages(
        conversation_id, [user("go"), assistant("", call("c1")), tool("c1"), assistant("done")]
    )
    await repository.truncate(conversation_id, keep_last=3)

    assert await repository.count_by_role(conversation_id) == {
        "system": 0,
        "user": 0,
        "assistant": 2,
        "tool": 1,
    }
    assert await repository.count_by_role(conversation_id, scope="history") == {
        "system": 1,
        "user": 1,
        "assistant": 2,
        "tool": 1,
    }


async def test_tool_blocks_and_pending_only(repository: Repository, conversation_id: str) -> None:
    await repository.append_messages(
        conversation_id,
        [
            user("look both up"),
            assistant("", call("call-1", "search", q="a"), call("call-2", "fetch", url="u")),
            tool("call-1", "found a"),
        ],
    )
    # Both calls are the main agent's, made by message 2, neither an error (yet).
    made = {"agent_id": "main", "assistant_seq": 2, "is_error": False}
    blocks = await repository.tool_blocks(conversation_id)
    assert blocks == [
        ToolBlock(
            call_id="call-1",
            tool_name="search",
            arguments={"q": "a"},
            result_seq=3,
            status="complete",
            **made,
        ),
        ToolBlock(
            call_id="call-2",
            tool_name="fetch",
            arguments={"url": "u"},
            result_seq=None,
            status="pending",
            **made,
        ),
    ]
    pending = await repository.tool_blocks(conversation_id, pending_only=True)
    assert [b.call_id for b in pending] == ["call-2"]

    await repository.append_messages(conversation_id, [tool("call-2", "404", is_error=True)])

    assert await repository.tool_blocks(conversation_id, pending_only=True) == []
    [_, answered] = await repository.tool_blocks(conversation_id)
    assert (answered.status, answered.result_seq, answered.is_error) == ("complete", 4, True)


async def test_sub_agent_messages_and_tool_threads_are_scoped(
    repository: Repository, conversation_id: str
) -> None:
    await repository.append_messages(
        conversation_id,
        [
            user("delegate the search"),
            assistant("", call("m1", "delegate")),
            user("search for X", agent_id="helper"),
            assistant("", call("h1", "search"), agent_id="helper"),
            tool("h1", "X is here", agent_id="helper"),
            assistant("X is here", agent_id="helper"),
            tool("m1", "helper says: X is here"),
        ],
    )

    main = await repository.visible_window(conversation_id, agent_id="main")
    helper = await repository.visible_window(conversation_id, agent_id="helper")
    assert seqs(main) == [1, 2, 7]
    assert seqs(helper) == [3, 4, 5, 6]
    assert seqs(await repository.visible_window(conversation_id)) == [1, 2, 3, 4, 5, 6, 7]
    helper_blocks = await repository.tool_blocks(conversation_id, agent_id="helper")
    main_blocks = await repository.tool_blocks(conversation_id, agent_id="main")
    assert [b.call_id for b in helper_blocks] == ["h1"]
    assert [b.call_id for b in main_blocks] == ["m1"]
    recent = await repository.recent_by_role(conversation_id, "user", 5, agent_id="helper")
    assert seqs(recent) == [3]
    history = await repository.recent_by_role(
        conversation_id, "assistant", 5, scope="history", agent_id="main"
    )
    assert seqs(history) == [2]
    assert await repository.visible_window(conversation_id, agent_id="nobody") == []
