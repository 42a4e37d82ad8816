"""A fork's views, copied set-based from its parent (`sql.COPY_FORKED`),
equal what replaying the fork's own log builds, row for row; and a fork
keeps its history when its parent is purged."""

from __future__ import annotations

import random

from store.domain.context import AgentProfile, TodoItem
from store.domain.conversation_keys import stream_id
from store.domain.messages import Message, TextPart, ToolCall
from store.domain.search import SearchQuery
from store.postgres import PostgresStorage
from store.repository import Repository
from store.repository.rebuild import rebuild
from tests.integration.test_rebuild_property import snapshot


async def rich_parent(repository: Repository) -> str:
    """Two agents, tool blocks (one left pending), edits, an insert, pins,
    batches of each agent, profiles and slots."""
    cid = (await repository.create_conversation(metadata={"p": 1})).id
    await repository.configure_agent(cid, AgentProfile(system_prompt="You code."))
    await repository.update_slot(cid, "role_definition", "You search.", agent_id="helper")
    await repository.update_slot(cid, "todo", [TodoItem(id="1", content="x", status="pending")])
    await repository.update_slot(cid, "notes", "custom", agent_id="helper")
    rng = random.Random(7)
    for turn in range(40):
        agent = "helper" if turn % 3 == 0 else "main"
        await repository.append_messages(
            cid, [Message(role="user", content=f"u{turn} ünïcode", agent_id=agent)]
        )
        if turn % 4 == 1:
            calls = (ToolCall(id=f"c{turn}", name="grep", arguments={"n": turn}),)
            await repository.append_messages(
                cid, [Message(role="assistant", tool_calls=calls, agent_id=agent)]
            )
            if turn < 35:
                await repository.append_messages(
                    cid,
                    [
                        Message(
                            role="tool",
                            tool_call_id=f"c{turn}",
                            content="out",
                            agent_id=agent,
                            is_error=turn % 8 == 1,
                        )
                    ],
                )
        else:
            await repository.append_messages(
                cid, [Message(role="assistant", content=f"a{turn}", agent_id=agent)]
            )
    await repository.replace(cid, 3, "edited three")
    await repository.replace(cid, 3, (TextPart(text="edited again"),))
    await repository.insert(cid, 1, [Message(role="user", content="inserted")])
    for seq in rng.sample(range(1, 60), 6):
        await repository.pin_message(cid, seq)
    await repository.pin_message(cid, (await repository.read_messages(cid))[0].seq, False)
    await repository.truncate(cid, keep_last=10, adjust=True, agent_id="helper")
    await repository.start_batch(cid, 50, adjust=True)
    return cid


async def _rebuilt_equals_inline(storage: PostgresStorage, repository: Repository, key: str) -> int:
    stream = stream_id(repository.tenant, key)
    inline = await snapshot(storage, stream)
    report = await rebuild(storage, stream)
    assert report.events == (await repository.get_conversation(key)).version
    rebuilt = await snapshot(storage, stream)
    for name in inline:
        assert rebuilt[name] == inline[name], f"{name} differs after rebuild"
    return len(inline["messages"])


async def test_a_forks_views_equal_its_rebuild(
    storage: PostgresStorage, repository: Repository
) -> None:
    parent = await rich_parent(repository)
    last = (await repository.get_conversation(parent)).next_seq - 1

    whole = await repository.fork(parent, metadata={"fork": "whole"})
    early = await repository.fork(parent, up_to_seq=last // 2)
    helper = await repository.fork(parent, agent_id="helper", up_to_seq=last - 3)

    assert await _rebuilt_equals_inline(storage, repository, whole.id) == last
    assert 0 < await _rebuilt_equals_inline(storage, repository, early.id) <= last // 2
    assert 0 < await _rebuilt_equals_inline(storage, repository, helper.id) < last // 2
    parent_history = await repository.read_messages(parent, limit=1000)
    fork_history = await repository.read_messages(whole.id, limit=1000)
    assert [(m.text, m.pinned, m.token_estimate) for m in fork_history] == [
        (m.text, m.pinned, m.token_estimate) for m in parent_history
    ]


async def test_a_fork_outlives_its_purged_parent_and_rebuilds(
    storage: PostgresStorage, repository: Repository
) -> None:
    parent = await rich_parent(repository)
    child = await repository.fork(parent)
    await repository.append_messages(child.id, [Message(role="user", content="child")])
    grandchild = await repository.fork(child.id, up_to_seq=child.next_seq)
    before = await repository.read_messages(grandchild.id, limit=1000)

    await repository.delete(parent)
    await repository.delete(child.id)

    assert await repository.read_messages(grandchild.id, limit=1000) == before
    assert await _rebuilt_equals_inline(storage, repository, grandchild.id) == len(before)
    assert await repository.read_messages(grandchild.id, limit=1000) == before
    # The fork's text is in its own log: search finds it there, edited content included.
    page = await repository.search_messages(
        SearchQuery(q="edited again", conversation_id=grandchild.id)
    )
    assert [(h.conversation_id, h.seq) for h in page.hits] == [(grandchild.id, 3)]
