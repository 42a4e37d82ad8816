"""The compaction job on real PostgreSQL, with real commits: agents appending
while it runs, two jobs (two pools, as two processes) at once, the
advisory-lock claim, the candidates query's cheap bound, and `convo compact`."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from typer.testing import CliRunner

from convo import app
from hosting.settings import Settings
from store.compaction import CompactionJob, CompactionPolicy
from store.domain.messages import Message, MessageKind, StoredMessage, ToolCall
from store.postgres import PostgresStorage
from store.repository import Repository
from tests.contract.conftest import assert_blocks_complete

TENANT = "acme"


def _turn(k: int, agent: str = "main") -> list[Message]:
    call_id = f"{agent}-{k}-{uuid.uuid4().hex[:6]}"
    return [
        Message(role="user", content=f"request {k}", agent_id=agent),
        Message(
            role="assistant",
            content=" ",
            tool_calls=(ToolCall(id=call_id, name="search", arguments={"q": k}),),
            agent_id=agent,
        ),
        Message(role="tool", tool_call_id=call_id, content=f"found {k}", agent_id=agent),
        Message(role="assistant", content=f"answer {k}", agent_id=agent),
    ]


async def _conversation(repository: Repository, turns: int) -> str:
    cid = (await repository.create_conversation()).id
    messages = [Message(role="system", content="rules")]
    for k in range(turns):
        messages += _turn(k)
    await repository.append_messages(cid, messages)
    return cid


async def _history(repository: Repository, cid: str) -> list[StoredMessage]:
    found: list[StoredMessage] = []
    while True:
        after = found[-1].seq if found else None
        page = await repository.read_messages(cid, after_seq=after, limit=1000)
        found += page
        if len(page) < 1000:
            return found


@pytest_asyncio.fixture
async def second_storage(database_url: str, settings: Settings) -> AsyncIterator[PostgresStorage]:
    """Another pool on the same database: another job process, as far as
    PostgreSQL can tell (its own sessions, its own advisory locks)."""
    storage = await PostgresStorage.connect(
        database_url, options=settings.connection_options(), max_size=12
    )
    yield storage
    await storage.close()


async def test_appends_during_compaction_lose_nothing(storage: PostgresStorage) -> None:
    repository = Repository(storage, tenant=TENANT)
    made = [await _conversation(repository, turns=30) for _ in range(4)]
    appended: dict[str, int] = dict.fromkeys(made, 0)
    stop = asyncio.Event()

    async def agent(cid: str) -> None:
        k = 1000
        while not stop.is_set():
            await repository.append_messages(cid, _turn(k))
            appended[cid] += 4
            k += 1
            # An eager agent: a turn every few tens of milliseconds (real ones
            # take seconds): the job's read-decide-write keeps racing them.
            await asyncio.sleep(0.02 * (1 + k % 3))

    policy = CompactionPolicy(max_messages=40, keep_last={"user": 2})
    writers = [asyncio.create_task(agent(cid)) for cid in made]
    try:
        await asyncio.sleep(0.05)
        report = await CompactionJob(repository, policy, max_attempts=30).run()
    finally:
        stop.set()
        await asyncio.gather(*writers)
    assert {r.status for r in report.results} == {"compacted"}, report
    assert sum(appended.values()) > 0
    for cid in made:
        history = await _history(repository, cid)
        kinds = [m.kind for m in history]
        # every message ever appended is still there, plus the one summary
        assert len(history) == 1 + 30 * 4 + appended[cid] + 1
        assert kinds.count(MessageKind.SUMMARY) == 1
        window = await repository.visible_window(cid, agent_id="main")
        assert_blocks_complete(window)
        summary = next(m for m in window if m.kind == MessageKind.SUMMARY)
        first, last = summary.metadata["compaction"]["covers"]
        shown = {m.seq for m in window}
        # The new window: the system message, the summary, every message from
        # the boundary on (those appended during the run included), nothing else.
        boundary = min(s for s in shown if s > last)
        assert shown == {1, summary.seq} | {
            m.seq for m in history if m.seq >= boundary and m.seq != summary.seq
        } | {s for s in shown if s < first}
        assert max(m.seq for m in history) in shown


async def test_two_job_processes_compact_each_conversation_once(
    storage: PostgresStorage, second_storage: PostgresStorage
) -> None:
    first = Repository(storage, tenant=TENANT)
    second = Repository(second_storage, tenant=TENANT)
    made = [await _conversation(first, turns=12) for _ in range(8)]
    policy = CompactionPolicy(max_messages=20)
    reports = await asyncio.gather(
        CompactionJob(first, policy, concurrency=3).run(),
        CompactionJob(second, policy, concurrency=3).run(),
    )
    compacted = [
        r.conversation_id for report in reports for r in report.results if r.status == "compacted"
    ]
    assert sorted(compacted) == sorted(str(c) for c in made)
    for cid in made:
        assert len(await first.batches(cid)) == 2


async def test_a_claim_holds_across_pools_and_ends_with_its_connection(
    storage: PostgresStorage, second_storage: PostgresStorage
) -> None:
    async with storage.try_claim("compaction\x1facme\x1fx") as claimed:
        assert claimed
        async with second_storage.try_claim("compaction\x1facme\x1fx") as other:
            assert not other
        async with second_storage.try_claim("compaction\x1facme\x1fy") as unrelated:
            assert unrelated
    async with second_storage.try_claim("compaction\x1facme\x1fx") as after:
        assert after


async def test_the_cheap_bound_never_hides_a_candidate(storage: PostgresStorage) -> None:
    """Windows shaped by every batch operation: the candidates found with a
    message threshold alone (bound first) are those a count finds."""
    repository = Repository(storage, tenant=TENANT)
    shapes = []
    for k in range(6):
        cid = await _conversation(repository, turns=6)
        shapes.append(cid)
        if k == 1:
            await repository.truncate(cid, keep_last=10, adjust=True)
        if k == 2:
            await repository.insert(
                cid, 0, [Message(role="user", content=f"x{i}") for i in range(9)]
            )
        if k == 3:
            await repository.filter(cid, roles=["user", "system"], adjust=True)
        if k == 4:
            await repository.truncate(cid, keep_last=4, adjust=True)
            await repository.rollback_to_batch(cid, 1)
    for threshold in (3, 8, 10, 12, 15, 20, 24):
        by_bound = {
            c.conversation_id
            for c in await CompactionJob(
                repository, CompactionPolicy(max_messages=threshold)
            ).candidates()
        }
        counted = {
            str(cid)
            for cid in shapes
            if len(await repository.visible_window(cid, agent_id="main")) > threshold
        }
        assert by_bound == counted, threshold


def test_convo_compact(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("COLUMNS", "200")  # the table's width, for rich

    async def seed() -> str:
        storage = await PostgresStorage.connect(database_url)
        try:
            return await _conversation(Repository(storage, tenant=TENANT), turns=10)
        finally:
            await storage.close()

    cid = asyncio.run(seed())
    runner = CliRunner()
    base = ["compact", "--tenant", TENANT, "--max-messages", "20", "--keep-last", "user=1"]

    dry = runner.invoke(app, [*base, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert str(cid)[:8] in dry.stdout
    assert "1 planned" in dry.stdout

    done = runner.invoke(app, [*base, "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert [(r["conversation_id"], r["status"]) for r in report["results"]] == [
        (str(cid), "compacted")
    ]

    again = runner.invoke(app, [*base, "--json"])
    assert json.loads(again.stdout)["results"] == []

    one = runner.invoke(app, [*base, "--json", "--conversation", str(cid)])
    assert [r["status"] for r in json.loads(one.stdout)["results"]] == ["below_threshold"]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ([], "name a threshold"),
        (["--max-messages", "5", "--keep-last", "robot=1"], "--keep-last"),
        (["--max-messages", "5", "--keep-last", "user=x"], "whole number"),
        (["--max-messages", "5", "--agent", "bad agent\x01"], "agent_id"),
    ],
)
def test_convo_compact_refuses_bad_options(options: list[str], problem: str) -> None:
    result = CliRunner().invoke(app, ["compact", "--tenant", TENANT, *options])
    assert result.exit_code == 2
    assert problem in result.stderr
