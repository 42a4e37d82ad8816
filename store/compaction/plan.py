"""The boundary and retention plan: pure, over one read of the window.

Given an agent's visible window (in window order), the calls still waiting
for a result and a `CompactionPolicy`, `plan_compaction` decides where the
new batch starts and what it keeps from before that point:

- The boundary is a turn boundary: a user message that is not a summary,
  or — when no turn boundary leaves a short enough tail (one very long
  turn) — the start of a step (any message but a tool result). Never inside
  a tool-call block (a call and every result it got stay on one side), and
  never after a call still waiting for its result: that call and everything
  after it stay visible.
- Which one: the earliest turn boundary whose tail fits the policy's
  target (keep as much as the target allows), else the earliest step that
  fits; none fits → the latest valid turn boundary (else step).
- Kept from before it: system messages (not earlier summaries: the new
  summary covers them; of reminders, only the latest of each kind — see
  `reminder_kind` — and none whose kind has a newer reminder after the
  boundary), pinned messages, the last `keep_last[role]` messages of each
  role — each with its whole tool-call block. Older reminders stay in the
  history, out of the window: a stale "TODO changed" must not pile up in
  every new window.
- Everything else before it leaves the window and is what the summary
  covers (`hidden`).

Each agent has its own window (`StartBatch.agent_id`), so the job reads
and compacts one agent's. Should `window` hold other agents' messages too,
those before the boundary are retained: compacting one agent never hides
another's.

`store.domain.commands` checks the same rules again when the batch starts (the
plan is made outside the write's lock); a plan that breaks them is refused
there with `BoundaryError`, never applied.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from store.compaction.policy import CompactionPolicy
from store.domain.messages import ROLES, MessageKind, StoredMessage

BoundaryKind = Literal["turn", "step"]


@dataclass(frozen=True, kw_only=True)
class WindowSize:
    messages: int
    tokens: int


@dataclass(frozen=True, kw_only=True)
class CompactionPlan:
    """Where the new batch starts and what it keeps: a `StartBatch` to be."""

    boundary_seq: int
    boundary_kind: BoundaryKind
    retain: tuple[int, ...]  # seqs before the boundary that stay visible (any agent)
    hidden: tuple[StoredMessage, ...]  # the agent's messages leaving the window
    kept: WindowSize  # the agent's window after it, the summary aside

    @property
    def hidden_seqs(self) -> tuple[int, ...]:
        return tuple(m.seq for m in self.hidden)


@dataclass(frozen=True, kw_only=True)
class NoPlan:
    """Why nothing can be compacted."""

    reason: str


def tokens_of(message: StoredMessage) -> int:
    return message.token_estimate or 0


def window_size(messages: Sequence[StoredMessage]) -> WindowSize:
    return WindowSize(messages=len(messages), tokens=sum(tokens_of(m) for m in messages))


def plan_compaction(
    window: Sequence[StoredMessage],
    *,
    agent_id: str,
    pending_call_ids: Collection[str],
    policy: CompactionPolicy,
) -> CompactionPlan | NoPlan:
    """Where to start the new batch of `agent_id`, and what to keep (see the
    module's docstring). `window` may hold other agents' messages too."""
    agent = [m for m in window if m.agent_id == agent_id]
    n = len(agent)
    if n < 2:
        return NoPlan(reason="the window is too short to compact")
    blocks = _blocks(agent)
    valid = _valid_boundaries(agent, blocks, set(pending_call_ids))
    if not valid:
        return NoPlan(reason="no boundary outside a tool-call block and before a pending call")
    suffix_tokens = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix_tokens[i] = suffix_tokens[i + 1] + tokens_of(agent[i])
    fits = [b for b in valid if policy.tail_fits(n - b, suffix_tokens[b])]
    turns = [b for b in fits if _is_turn_start(agent[b])]
    if turns:
        boundary, kind = turns[0], "turn"
    elif fits:
        boundary, kind = fits[0], "step"
    else:
        # Nothing fits: compact as much as a boundary allows, at a turn if one can.
        valid_turns = [b for b in valid if _is_turn_start(agent[b])]
        boundary, kind = (valid_turns[-1], "turn") if valid_turns else (valid[-1], "step")
    kept = _retained(agent, boundary, blocks, policy)
    hidden = tuple(agent[i] for i in range(boundary) if i not in kept)
    if all(m.kind == MessageKind.SUMMARY for m in hidden):
        return NoPlan(reason="nothing but the last summary would leave the window")
    anchor = agent[boundary]
    others: list[int] = []
    for m in window:
        if m.seq == anchor.seq:
            break
        if m.agent_id != agent_id:
            others.append(m.seq)
    kept_messages = [agent[i] for i in sorted(kept)] + list(agent[boundary:])
    return CompactionPlan(
        boundary_seq=anchor.seq,
        boundary_kind=kind,  # type: ignore[arg-type]
        retain=tuple(sorted({agent[i].seq for i in kept} | set(others))),
        hidden=hidden,
        kept=window_size(kept_messages),
    )


@dataclass(frozen=True)
class _Blocks:
    of: dict[int, int]  # position → the position of its block's assistant message
    members: dict[int, list[int]]  # assistant position → the block's positions
    end: dict[int, int]  # assistant position → its block's last position


def _blocks(agent: Sequence[StoredMessage]) -> _Blocks:
    call_at: dict[str, int] = {}
    of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for i, m in enumerate(agent):
        if m.tool_calls:
            members[i] = [i]
            of[i] = i
            for call in m.tool_calls:
                call_at[call.id] = i
        elif m.tool_call_id is not None and m.tool_call_id in call_at:
            start = call_at[m.tool_call_id]
            members[start].append(i)
            of[i] = start
    end = {start: max(positions) for start, positions in members.items()}
    return _Blocks(of=of, members=members, end=end)


def _valid_boundaries(
    agent: Sequence[StoredMessage], blocks: _Blocks, pending: set[str]
) -> list[int]:
    """Positions 1..n-1 a batch may start at: not a tool result, no block
    running across, no pending call before."""
    valid = []
    reach = -1  # the furthest position a block started before here runs to
    for b in range(1, len(agent)):
        previous = agent[b - 1]
        if previous.tool_calls:
            if any(c.id in pending for c in previous.tool_calls):
                break  # this call and everything after it stay visible
            reach = max(reach, blocks.end[b - 1])
        if reach >= b or agent[b].role == "tool":
            continue
        valid.append(b)
    return valid


def _is_turn_start(message: StoredMessage) -> bool:
    return message.role == "user" and message.kind != MessageKind.SUMMARY


# A reminder's kind, when its writer names one (`{"reminder_kind": "todo"}`):
# reminders of one kind replace each other. A reminder without it is of
# the one unnamed kind.
REMINDER_KIND = "reminder_kind"


def reminder_kind(message: StoredMessage) -> str:
    kind = message.metadata.get(REMINDER_KIND)
    return kind if isinstance(kind, str) else ""


def _retained(
    agent: Sequence[StoredMessage], boundary: int, blocks: _Blocks, policy: CompactionPolicy
) -> set[int]:
    latest: dict[str, int] = {}  # each reminder kind's last position in the window
    for i, m in enumerate(agent):
        if m.kind == MessageKind.REMINDER:
            latest[reminder_kind(m)] = i
    kept = {
        i
        for i in range(boundary)
        if agent[i].pinned
        or (
            agent[i].role == "system"
            and agent[i].kind != MessageKind.SUMMARY
            and (agent[i].kind != MessageKind.REMINDER or latest[reminder_kind(agent[i])] == i)
        )
    }
    for role in ROLES:
        wanted = policy.keep_last.get(role, 0)
        if not wanted:
            continue
        of_role = [
            i for i, m in enumerate(agent) if m.role == role and m.kind != MessageKind.SUMMARY
        ]
        kept.update(i for i in of_role[-wanted:] if i < boundary)
    # A kept message keeps its whole tool-call block (all of it lies before
    # the boundary: the boundary never cuts a block).
    for i in list(kept):
        start = blocks.of.get(i)
        if start is not None:
            kept.update(blocks.members[start])
    return kept
