"""The compaction plan (pure), the policy, the summarizers: no database."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from store.compaction import (
    CompactionPlan,
    CompactionPolicy,
    ExtractiveSummarizer,
    NoPlan,
    SummaryRefused,
    check_summary,
    parse_keep_last,
    plan_compaction,
    policy_refusal,
)
from store.compaction.openai_compatible import OpenAICompatibleSummarizer, SummarizerFailed
from store.domain.errors import InvalidOperation
from store.domain.messages import MessageKind, StoredMessage, ToolCall


class Builder:
    """A window of stored messages, seqs from 1, one token a message unless said."""

    def __init__(self) -> None:
        self.messages: list[StoredMessage] = []

    def add(self, role: str, text: str = "", **extra: Any) -> StoredMessage:
        seq = len(self.messages) + 1
        extra.setdefault("token_estimate", 1)
        message = StoredMessage(role=role, content=text or f"{role} {seq}", seq=seq, **extra)
        self.messages.append(message)
        return message

    def turn(self, *tools: str, answer: bool = True) -> None:
        self.add("user", f"request {len(self.messages) + 1}")
        for name in tools:
            call_id = f"c{len(self.messages) + 1}"
            self.add("assistant", " ", tool_calls=(ToolCall(id=call_id, name=name),))
            self.add("tool", "ok", tool_call_id=call_id)
        if answer:
            self.add("assistant", f"answer {len(self.messages) + 1}")


def _plan(
    window: Sequence[StoredMessage], pending: Sequence[str] = (), **policy: Any
) -> CompactionPlan:
    plan = plan_compaction(
        window, agent_id="main", pending_call_ids=pending, policy=CompactionPolicy(**policy)
    )
    assert isinstance(plan, CompactionPlan), plan
    return plan


def test_the_boundary_is_the_earliest_turn_whose_tail_fits() -> None:
    b = Builder()
    b.add("system", "rules")
    for _ in range(10):
        b.turn("search")  # 4 messages a turn: U A[c] T A
    plan = _plan(b.messages, max_messages=20)
    # tail ≤ 10 messages: the last 2 turns (8 messages) start at seq 34
    assert plan.boundary_seq == 34
    assert plan.boundary_kind == "turn"
    assert plan.retain == (1,)  # the system message
    assert plan.hidden_seqs == tuple(range(2, 34))
    assert plan.kept.messages == 9


def test_keep_last_keeps_whole_tool_blocks_and_pinned_messages() -> None:
    b = Builder()
    b.add("system", "rules")
    for _ in range(10):
        b.turn("search")
    pinned = b.messages[5].model_copy(update={"pinned": True})  # seq 6: a user request
    b.messages[5] = pinned
    plan = _plan(b.messages, max_messages=20, keep_last={"tool": 3, "user": 2})
    # The 3rd-last tool result is seq 32: its call (31) stays with it; the
    # last 2 user messages are in the tail already.
    assert plan.retain == (1, 6, 31, 32)
    assert 31 not in plan.hidden_seqs
    assert 6 not in plan.hidden_seqs


def test_a_pending_call_and_everything_after_it_stay_visible() -> None:
    b = Builder()
    for _ in range(5):
        b.turn("search")
    b.add("user", "go on")
    b.add("assistant", " ", tool_calls=(ToolCall(id="slow", name="build"),))  # seq 22
    for _ in range(30):
        b.add("system", "progress", kind=MessageKind.REMINDER)
    plan = _plan(b.messages, pending=["slow"], max_messages=10)
    assert plan.boundary_seq <= 22
    assert plan.boundary_seq == 21  # the turn that made the call
    assert all(m.seq < 21 for m in plan.hidden)


def test_nothing_to_compact_when_the_pending_call_is_first() -> None:
    b = Builder()
    b.add("assistant", " ", tool_calls=(ToolCall(id="slow", name="build"),))
    for _ in range(5):
        b.add("user", "waiting")
    plan = plan_compaction(
        b.messages,
        agent_id="main",
        pending_call_ids={"slow"},
        policy=CompactionPolicy(max_messages=2),
    )
    assert isinstance(plan, NoPlan)


def test_one_long_turn_is_cut_at_a_step_outside_any_block() -> None:
    b = Builder()
    b.add("user", "refactor everything")
    for k in range(20):
        call_id = f"k{k}"
        b.add("assistant", "step", tool_calls=(ToolCall(id=call_id, name="edit"),))
        b.add("tool", "done", tool_call_id=call_id)
    plan = _plan(b.messages, max_messages=10)
    assert plan.boundary_kind == "step"
    boundary = next(m for m in b.messages if m.seq == plan.boundary_seq)
    assert boundary.role == "assistant"
    assert len(b.messages) - plan.boundary_seq + 1 <= 5


def test_an_earlier_summary_is_folded_in_not_retained() -> None:
    b = Builder()
    b.add("system", "rules")
    b.add("system", "summary of before", kind=MessageKind.SUMMARY)
    for _ in range(6):
        b.turn()
    plan = _plan(b.messages, max_messages=8)
    assert 2 in plan.hidden_seqs
    assert plan.retain == (1,)


def test_only_a_summary_leaving_is_nothing_to_compact() -> None:
    b = Builder()
    b.add("system", "summary", kind=MessageKind.SUMMARY)
    b.add("user", "one very long request", token_estimate=1000)
    b.add("assistant", "answer", token_estimate=1000)
    plan = plan_compaction(
        b.messages, agent_id="main", pending_call_ids=(), policy=CompactionPolicy(max_tokens=100)
    )
    assert isinstance(plan, NoPlan)


def test_other_agents_messages_before_the_boundary_are_retained() -> None:
    b = Builder()
    for k in range(6):
        b.turn()
        b.add("assistant", f"sub {k}", agent_id="searcher")
    plan = _plan(b.messages, max_messages=8)
    sub_before = [
        m.seq for m in b.messages if m.agent_id == "searcher" and m.seq < plan.boundary_seq
    ]
    assert sub_before
    assert set(sub_before) <= set(plan.retain)
    assert all(m.agent_id == "main" for m in plan.hidden)


def test_token_thresholds() -> None:
    b = Builder()
    for _ in range(10):
        b.turn()
    policy = CompactionPolicy(max_tokens=10)
    assert policy.exceeded(30, 30)
    assert not policy.exceeded(30, 10)
    plan = _plan(b.messages, max_tokens=10)
    assert plan.kept.tokens <= 5


# --- the property: never a split block, never a hidden pending call ------------------

STEP = st.sampled_from(["user", "answer", "block", "block2", "pending", "reminder"])


@given(st.lists(STEP, min_size=2, max_size=60), st.integers(2, 30), st.integers(0, 3))
def test_a_plan_never_splits_a_block_or_hides_a_pending_call(
    steps: list[str], max_messages: int, keep_tools: int
) -> None:
    b = Builder()
    pending: list[str] = []
    for step in steps:
        if step == "user":
            b.add("user", "u")
        elif step == "answer":
            b.add("assistant", "a")
        elif step == "reminder":
            b.add("system", "r", kind=MessageKind.REMINDER)
        else:
            n = 2 if step == "block2" else 1
            ids = [f"c{len(b.messages) + 1}-{k}" for k in range(n)]
            b.add("assistant", " ", tool_calls=tuple(ToolCall(id=i, name="t") for i in ids))
            if step == "pending":
                pending.extend(ids)
            else:
                for i in ids:
                    b.add("tool", "ok", tool_call_id=i)
    plan = plan_compaction(
        b.messages,
        agent_id="main",
        pending_call_ids=pending,
        policy=CompactionPolicy(max_messages=max_messages, keep_last={"tool": keep_tools}),
    )
    if isinstance(plan, NoPlan):
        return
    shown = {m.seq for m in b.messages if m.seq >= plan.boundary_seq} | set(plan.retain)
    hidden = set(plan.hidden_seqs)
    assert shown.isdisjoint(hidden)
    assert shown | hidden == {m.seq for m in b.messages}
    assert all(s < plan.boundary_seq for s in plan.retain)
    result_of = {m.tool_call_id: m.seq for m in b.messages if m.tool_call_id}
    for m in b.messages:
        if not m.tool_calls:
            continue
        block = {m.seq} | {result_of[c.id] for c in m.tool_calls if c.id in result_of}
        assert block <= shown or block <= hidden, f"block of {m.seq} split"
        if any(c.id in pending for c in m.tool_calls):
            assert m.seq in shown
            assert m.seq >= plan.boundary_seq


# --- the policy ----------------------------------------------------------------------


def test_a_policy_needs_a_threshold() -> None:
    with pytest.raises(ValidationError) as caught:
        CompactionPolicy()
    assert "name a threshold" in str(policy_refusal(caught.value))


@pytest.mark.parametrize(
    "fields",
    [
        {"max_messages": 0},
        {"max_messages": "10"},
        {"max_tokens": -1},
        {"max_messages": 5, "keep_last": {"robot": 1}},
        {"max_messages": 5, "keep_last": {"user": 5000}},
        {"max_messages": 5, "target_ratio": 1.5},
        {"max_messages": 5, "agent_id": ""},
        {"max_messages": 5, "unknown": 1},
    ],
)
def test_a_policy_refuses_hostile_fields(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CompactionPolicy(**fields)


def test_keep_last_options() -> None:
    assert parse_keep_last(["user=2", "tool=0"]) == {"user": 2, "tool": 0}
    for bad in ("user", "robot=1", "user=x", "user=-1", "user=99999"):
        with pytest.raises(InvalidOperation):
            parse_keep_last([bad])


# --- summaries -------------------------------------------------------------------------


async def test_the_extractive_summary_names_requests_tools_and_answers() -> None:
    b = Builder()
    b.add("system", "earlier work on the parser", kind=MessageKind.SUMMARY)
    b.turn("search", "read_file")
    b.add("assistant", " ", tool_calls=(ToolCall(id="bad", name="run"),))
    b.add("tool", "boom", tool_call_id="bad", is_error=True)
    b.add("user", "x" * 10_000)
    text = await ExtractiveSummarizer().summarize(b.messages, conversation_id="c", agent_id="main")
    assert text.startswith(f"Summary of {len(b.messages)} earlier messages (seq 1-")
    assert "earlier work on the parser" in text
    assert "request 2" in text
    assert "run ×1 (1 failed)" in text
    assert "search ×1" in text
    assert "answer" in text
    assert len(text) <= 4_000
    assert text == await ExtractiveSummarizer().summarize(
        b.messages, conversation_id="c", agent_id="main"
    )


async def test_the_extractive_summary_is_bounded() -> None:
    b = Builder()
    for _ in range(200):
        b.turn("search")
    text = ExtractiveSummarizer(max_chars=500).summary_text(b.messages)
    assert len(text) <= 500
    assert "(the last" in text


def test_check_summary() -> None:
    assert check_summary("  fine  ", max_chars=10) == "fine"
    for bad in ("", "   ", "x" * 11, None, "a\x00b"):
        with pytest.raises(SummaryRefused):
            check_summary(bad, max_chars=10)


async def test_the_openai_compatible_summarizer_sends_one_chat_request() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"content": "short"}}]})

    b = Builder()
    b.turn("search")
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        summarizer = OpenAICompatibleSummarizer(
            base_url="http://llm.test/v1/", model="m", api_key="k", client=client
        )
        assert await summarizer.summarize(b.messages, conversation_id="c", agent_id="main") == (
            "short"
        )
    assert str(seen[0].url) == "http://llm.test/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer k"
    assert "[1] user: request 1" in summarizer.transcript(b.messages)


async def test_the_openai_compatible_summarizer_refuses_a_shapeless_answer() -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, json={"choices": []}))
    async with httpx.AsyncClient(transport=transport) as client:
        summarizer = OpenAICompatibleSummarizer(
            base_url="http://llm.test", model="m", client=client
        )
        with pytest.raises(SummarizerFailed):
            await summarizer.summarize([], conversation_id="c", agent_id="main")


# --- reminders: only the latest of each kind survives into a new window ------------------


def test_only_the_latest_reminder_of_each_kind_is_kept() -> None:
    b = Builder()
    b.add("system", "rules")
    todo_1 = b.add(
        "system", "todo v1", kind=MessageKind.REMINDER, metadata={"reminder_kind": "todo"}
    )
    b.turn()
    todo_2 = b.add(
        "system", "todo v2", kind=MessageKind.REMINDER, metadata={"reminder_kind": "todo"}
    )
    read = b.add(
        "system", "read a.py", kind=MessageKind.REMINDER, metadata={"reminder_kind": "file"}
    )
    plain_1 = b.add("system", "note 1", kind=MessageKind.REMINDER)
    b.turn()
    plain_2 = b.add("system", "note 2", kind=MessageKind.REMINDER)
    b.turn()
    b.turn()
    plan = _plan(b.messages, max_messages=8)
    assert plan.boundary_seq > plain_2.seq
    assert todo_2.seq in plan.retain
    assert read.seq in plan.retain
    assert plain_2.seq in plan.retain
    assert 1 in plan.retain  # a system message that is no reminder stays
    for stale in (todo_1, plain_1):
        assert stale.seq not in plan.retain
        assert stale.seq in plan.hidden_seqs  # still in history, out of the window


def test_a_reminder_with_a_newer_one_after_the_boundary_leaves() -> None:
    b = Builder()
    old = b.add("system", "todo v1", kind=MessageKind.REMINDER, metadata={"reminder_kind": "todo"})
    b.turn()
    b.turn()
    b.turn()
    b.add("system", "todo v2", kind=MessageKind.REMINDER, metadata={"reminder_kind": "todo"})
    b.turn()
    plan = _plan(b.messages, max_messages=6)
    assert old.seq not in plan.retain
    assert old.seq in plan.hidden_seqs


def test_a_pinned_reminder_stays_whatever_its_age() -> None:
    b = Builder()
    pinned = b.add("system", "v1", kind=MessageKind.REMINDER, pinned=True)
    b.turn()
    b.add("system", "v2", kind=MessageKind.REMINDER)
    b.turn()
    b.turn()
    assert pinned.seq in _plan(b.messages, max_messages=4).retain


def test_a_summarizer_by_name() -> None:
    from store.compaction import make_summarizer
    from store.domain.errors import ConfigurationError

    assert isinstance(make_summarizer("extractive"), ExtractiveSummarizer)
    model = make_summarizer("openai-compatible", url="http://127.0.0.1:9/v1", model="m")
    assert isinstance(model, OpenAICompatibleSummarizer)
    assert model.url == "http://127.0.0.1:9/v1/chat/completions"
    with pytest.raises(ConfigurationError, match="CONVO_SUMMARIZER_MODEL to be set"):
        make_summarizer("openai-compatible", url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigurationError, match="unknown summarizer 'gpt'"):
        make_summarizer("gpt")
