"""Contract: the compaction job (store.compaction) on both storages — the
candidates it finds, the batch it starts, what it keeps, and everything it
must leave unchanged (a failed summary, a dry run, another agent's window,
another tenant's conversations)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from store.compaction import (
    CompactionJob,
    CompactionPolicy,
    ExtractiveSummarizer,
)
from store.domain.context import AgentProfile
from store.domain.messages import Message, MessageKind, StoredMessage
from store.repository import Repository
from tests.contract.conftest import (
    RepositoryFactory,
    Snapshot,
    assert_blocks_complete,
    assistant,
    call,
    seqs,
    system,
    tool,
    user,
)


@pytest.fixture
def repository(make_repository: RepositoryFactory) -> Repository:
    # The job looks at a whole tenant: each test has its own.
    return make_repository(tenant=f"compaction-{uuid.uuid4().hex[:10]}")


def _turns(count: int, *, start: int = 0, agent: str = "main") -> list[Message]:
    """`count` turns of U A[call] T A (4 messages each)."""
    messages: list[Message] = []
    for k in range(start, start + count):
        messages += [
            user(f"request {k}", agent_id=agent),
            assistant(" ", call(f"{agent}-c{k}", "search", q=k), agent_id=agent),
            tool(f"{agent}-c{k}", f"found {k}", agent_id=agent),
            assistant(f"answer {k}", agent_id=agent),
        ]
    return messages


async def _conversation(repository: Repository, turns: int = 10) -> str:
    cid = (await repository.create_conversation()).id
    await repository.append_messages(cid, [system("rules"), *_turns(turns)])
    return cid


class Failing:
    name = "failing"

    async def summarize(
        self, messages: Sequence[StoredMessage], *, conversation_id: str, agent_id: str
    ) -> str:
        raise RuntimeError("the model is down")


class Answering:
    def __init__(self, text: str) -> None:
        self.text = text

    async def summarize(
        self, messages: Sequence[StoredMessage], *, conversation_id: str, agent_id: str
    ) -> str:
        return self.text


async def test_a_long_window_gets_a_new_batch_led_by_a_summary(repository: Repository) -> None:
    cid = await _conversation(repository)  # 41 messages
    policy = CompactionPolicy(max_messages=20, keep_last={"user": 1})
    report = await CompactionJob(repository, policy).run()
    (result,) = report.results
    assert result.status == "compacted", result
    assert result.conversation_id == str(cid)
    assert result.before is not None
    assert result.before.messages == 41
    assert result.boundary_seq is not None
    window = await repository.visible_window(cid, agent_id="main")
    summary = next(m for m in window if m.kind == MessageKind.SUMMARY)
    assert summary.role == "system"
    assert summary.seq == 42
    assert summary.metadata["compaction"]["covers"] == [2, result.boundary_seq - 1]
    assert "request 0" in summary.text
    # the system message, the summary, then everything from the boundary on
    assert seqs(window) == [1, 42, *range(result.boundary_seq, 42)]
    assert result.after is not None
    assert result.after.messages == len(window)
    assert not policy.exceeded(len(window), 0)
    assert_blocks_complete(window)
    # Nothing deleted: the history still has every message, and batch 1 shows them.
    assert len(await repository.visible_window(cid, batch=1)) == 41
    assert sum((await repository.count_by_role(cid, scope="history")).values()) == 42
    # Run again: nothing over the thresholds any more.
    again = await CompactionJob(repository, policy).run()
    assert again.results == ()
    assert (await CompactionJob(repository, policy).compact(str(cid))).status == "below_threshold"


async def test_candidates_are_the_conversations_over_a_threshold(
    make_repository: RepositoryFactory, repository: Repository
) -> None:
    long_one = await _conversation(repository, turns=10)
    await _conversation(repository, turns=2)  # 9 messages
    archived = await _conversation(repository, turns=10)
    await repository.archive(archived)
    deleted = await _conversation(repository, turns=10)
    await repository.delete(deleted)
    other_tenant = make_repository(tenant=f"other-{uuid.uuid4().hex[:8]}")
    await _conversation(other_tenant, turns=10)

    by_messages = await CompactionJob(repository, CompactionPolicy(max_messages=20)).candidates()
    assert [c.conversation_id for c in by_messages] == [str(long_one)]
    assert by_messages[0].messages == 41
    by_tokens = await CompactionJob(repository, CompactionPolicy(max_tokens=100)).candidates()
    assert [c.conversation_id for c in by_tokens] == [str(long_one)]
    assert by_tokens[0].tokens > 100
    none = await CompactionJob(repository, CompactionPolicy(max_messages=41)).candidates()
    assert none == []


async def test_candidates_page_through_the_tenant(repository: Repository) -> None:
    made = [await _conversation(repository, turns=3) for _ in range(7)]
    job = CompactionJob(repository, CompactionPolicy(max_messages=5))
    from store.compaction.candidates import find_candidates

    found = [
        c.conversation_id
        async for c in find_candidates(
            repository.storage, repository.tenant, job.policy, page_size=3
        )
    ]
    assert sorted(found) == sorted(str(c) for c in made)
    assert len(await job.candidates(limit=4)) == 4


async def test_a_pending_call_is_never_hidden(repository: Repository) -> None:
    cid = (await repository.create_conversation()).id
    await repository.append_messages(
        cid,
        [
            *_turns(3),
            user("build it"),
            assistant("building", call("slow", "build")),
            *[Message(role="system", kind="reminder", content=f"tick {k}") for k in range(20)],
        ],
    )
    result = await CompactionJob(repository, CompactionPolicy(max_messages=10)).compact(str(cid))
    assert result.status == "compacted", result
    window = await repository.visible_window(cid, agent_id="main")
    assert 14 in seqs(window)  # the call still waiting
    assert result.boundary_seq is not None
    assert result.boundary_seq <= 14
    await repository.append_messages(cid, [tool("slow", "built")])
    assert_blocks_complete(await repository.visible_window(cid, agent_id="main"))


async def test_a_pending_first_call_leaves_nothing_to_compact(repository: Repository) -> None:
    cid = (await repository.create_conversation()).id
    await repository.append_messages(
        cid,
        [
            assistant(" ", call("first", "build")),
            *[Message(role="system", kind="reminder", content=f"tick {k}") for k in range(10)],
        ],
    )
    before = await Snapshot.take(repository, cid)
    result = await CompactionJob(repository, CompactionPolicy(max_messages=5)).compact(str(cid))
    assert result.status == "nothing_to_compact"
    assert await Snapshot.take(repository, cid) == before


@pytest.mark.parametrize(
    ("summarizer", "reason"),
    [
        (Failing(), "the model is down"),
        (Answering("   "), "empty summary"),
        (Answering("x" * 101), "more than the 100 allowed"),
    ],
    ids=["raises", "empty", "too-long"],
)
async def test_a_failed_summary_changes_nothing(
    repository: Repository, summarizer: object, reason: str
) -> None:
    cid = await _conversation(repository)
    before = await Snapshot.take(repository, cid)
    policy = CompactionPolicy(max_messages=20, max_summary_chars=100)
    report = await CompactionJob(repository, policy, summarizer=summarizer).run()  # type: ignore[arg-type]
    (result,) = report.results
    assert result.status == "summary_failed"
    assert result.detail is not None
    assert reason in result.detail
    assert report.failed
    assert await Snapshot.take(repository, cid) == before


async def test_a_slow_summary_times_out_and_changes_nothing(repository: Repository) -> None:
    class Slow:
        async def summarize(
            self, messages: Sequence[StoredMessage], *, conversation_id: str, agent_id: str
        ) -> str:
            await asyncio.sleep(10)
            return "late"

    cid = await _conversation(repository)
    before = await Snapshot.take(repository, cid)
    job = CompactionJob(
        repository, CompactionPolicy(max_messages=20), summarizer=Slow(), summary_timeout=0.05
    )
    result = await job.compact(str(cid))
    assert (result.status, result.detail) == ("summary_failed", "the summarizer timed out")
    assert await Snapshot.take(repository, cid) == before


async def test_a_dry_run_changes_nothing(repository: Repository) -> None:
    cid = await _conversation(repository)
    before = await Snapshot.take(repository, cid)
    policy = CompactionPolicy(max_messages=20)
    report = await CompactionJob(repository, policy).run(dry_run=True)
    (result,) = report.results
    assert result.status == "planned"
    assert result.boundary_seq == 34
    assert result.boundary_kind == "turn"
    assert result.hidden_range == (2, 33)
    assert result.after is not None
    assert result.after.messages == 10
    assert await Snapshot.take(repository, cid) == before
    # ... and the real run does what the dry run said.
    done = (await CompactionJob(repository, policy).run()).results[0]
    assert (done.boundary_seq, done.hidden_range, done.retained) == (
        result.boundary_seq,
        result.hidden_range,
        result.retained,
    )


async def test_two_jobs_at_once_compact_each_conversation_once(repository: Repository) -> None:
    made = [await _conversation(repository) for _ in range(6)]
    policy = CompactionPolicy(max_messages=20)
    first, second = await asyncio.gather(
        CompactionJob(repository, policy, concurrency=2).run(),
        CompactionJob(repository, policy, concurrency=3).run(),
    )
    compacted = [
        r.conversation_id for r in (*first.results, *second.results) if r.status == "compacted"
    ]
    assert sorted(compacted) == sorted(str(c) for c in made)
    for cid in made:
        assert len(await repository.batches(cid)) == 2


async def test_a_claimed_conversation_is_left_to_its_claimant(repository: Repository) -> None:
    cid = await _conversation(repository)
    job = CompactionJob(repository, CompactionPolicy(max_messages=20))
    name = f"compaction\x1f{repository.tenant}\x1f{cid}"
    async with repository.storage.try_claim(name) as claimed:
        assert claimed
        async with repository.storage.try_claim(name) as again:
            assert not again
        result = await job.compact(str(cid))
        assert result.status == "claimed_elsewhere"
    assert (await job.compact(str(cid))).status == "compacted"


async def test_compacting_main_leaves_a_sub_agents_payload_unchanged(
    repository: Repository,
) -> None:
    cid = (await repository.create_conversation()).id
    await repository.configure_agent(
        cid,
        AgentProfile(
            agent_id="searcher", is_sub_agent=True, role_definition="You search the code base."
        ),
    )
    mixed: list[Message] = [system("rules")]
    main_turns, sub_turns = _turns(10), _turns(3, agent="searcher")
    for k in range(10):
        mixed += main_turns[4 * k : 4 * k + 4]
        if k < 3:
            mixed += sub_turns[4 * k : 4 * k + 4]
    await repository.append_messages(cid, mixed)
    sub_before = await repository.assemble(cid, agent_id="searcher", format="anthropic")
    sub_window = await repository.visible_window(cid, agent_id="searcher")
    result = await CompactionJob(repository, CompactionPolicy(max_messages=20)).compact(str(cid))
    assert result.status == "compacted", result
    sub_after = await repository.assemble(cid, agent_id="searcher", format="anthropic")
    assert sub_after.payload == sub_before.payload
    assert await repository.visible_window(cid, agent_id="searcher") == sub_window
    main = await repository.visible_window(cid, agent_id="main")
    assert all(m.agent_id == "main" for m in main)
    assert any(m.kind == MessageKind.SUMMARY for m in main)


async def test_keep_last_and_pinned_messages_stay(repository: Repository) -> None:
    cid = await _conversation(repository)
    await repository.pin_message(cid, 6)  # "request 1"
    policy = CompactionPolicy(max_messages=20, keep_last={"tool": 4})
    result = await CompactionJob(repository, policy).compact(str(cid))
    assert result.status == "compacted"
    window = await repository.visible_window(cid, agent_id="main")
    shown = seqs(window)
    assert 6 in shown
    tools = [m for m in window if m.role == "tool"]
    assert len(tools) >= 4
    assert_blocks_complete(window)


async def test_a_second_compaction_folds_the_first_summary_in(repository: Repository) -> None:
    cid = await _conversation(repository)
    policy = CompactionPolicy(max_messages=20)
    job = CompactionJob(repository, policy, summarizer=ExtractiveSummarizer())
    assert (await job.compact(str(cid))).status == "compacted"
    await repository.append_messages(cid, _turns(6, start=10))
    second = await job.compact(str(cid))
    assert second.status == "compacted", second
    window = await repository.visible_window(cid, agent_id="main")
    summaries = [m for m in window if m.kind == MessageKind.SUMMARY]
    assert len(summaries) == 1
    assert "Before that: Summary of" in summaries[0].text


async def test_named_conversations_are_reported_each(
    make_repository: RepositoryFactory, repository: Repository
) -> None:
    long_one = await _conversation(repository)
    short_one = await _conversation(repository, turns=1)
    other = make_repository(tenant=f"other-{uuid.uuid4().hex[:8]}")
    theirs = await _conversation(other)
    report = await CompactionJob(repository, CompactionPolicy(max_messages=20)).run(
        conversation_ids=[str(long_one), str(short_one), str(theirs), str(uuid.uuid4())]
    )
    assert [r.status for r in report.results] == [
        "compacted",
        "below_threshold",
        "not_found",
        "not_found",
    ]
    assert len(await other.batches(theirs)) == 1
