"""The job runner: compact each conversation over a threshold, safely.

For each conversation (the tenant's candidates, or the ones named):

1. Claim it (`Storage.try_claim`), so two jobs never compact it twice: a
   conversation another job holds is reported `claimed_elsewhere` and left
   alone. The claim is held while the summary is written, which may take a
   model seconds.
2. Read its version, then the agent's window and the pending calls, and
   decide on them (`store.compaction.plan`): below the thresholds →
   `below_threshold` (a conversation compacted a moment ago by another job
   ends here); no boundary → `nothing_to_compact`; a dry run stops here
   (`planned`).
3. Summarize what leaves the window (`store.compaction.summarizer`). A
   summarizer that raises, times out, or answers an empty or too long text
   ends the conversation's compaction (`summary_failed`): nothing was
   written, so the conversation stays exactly as it was.
4. Start the batch with `expected_version` = the version read in 2. Agents
   keep appending meanwhile: if anything was written since, the store
   refuses (`ConcurrencyConflict`) and the job reads and decides again — up
   to `max_attempts` times, then reports `conflict`. Appends do not change
   what lies before the boundary, so a retry usually finds the same hidden
   messages and reuses the summary instead of asking for it again.

Why an advisory lock and not `SELECT … FOR UPDATE SKIP LOCKED`: the claim
must last while the summary is written (a model call), and a row lock on
the conversation's stream row would stall every agent appending to it for
that long — appends lock that row — and would keep a transaction open,
which holds back the global feed's horizon (store.postgres.feed) and runs
into `idle_in_transaction_session_timeout`. A session-level advisory lock
(`pg_try_advisory_lock`) touches no row, needs no open transaction, is
never waited for (a `try`), and is released by PostgreSQL if the job's
connection dies, so a crashed job never leaves a conversation claimed.
Correctness does not rest on the claim: `expected_version` alone keeps a
second job from committing a plan made on a stale window; the claim only
keeps two jobs from both summarizing — and both closing — one conversation.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from store.compaction.candidates import find_candidates
from store.compaction.plan import (
    BoundaryKind,
    CompactionPlan,
    NoPlan,
    WindowSize,
    plan_compaction,
    window_size,
)
from store.compaction.policy import CompactionPolicy
from store.compaction.summarizer import (
    ExtractiveSummarizer,
    Summarizer,
    SummaryRefused,
    check_summary,
    clip,
)
from store.domain.conversation_keys import key_problem
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationBusy,
    ConversationNotFound,
    ConvoStoreError,
)
from store.domain.messages import Message, MessageKind
from store.domain.operations import StartBatch
from store.domain.tokens import estimate_message_tokens
from store.repository.port import CompactionCandidate

if TYPE_CHECKING:
    from store.repository import Repository

Status = Literal[
    "compacted",
    "planned",
    "below_threshold",
    "nothing_to_compact",
    "claimed_elsewhere",
    "summary_failed",
    "conflict",
    "not_found",
    "failed",
]
STATUSES: tuple[Status, ...] = get_args(Status)
FAILURES: frozenset[Status] = frozenset({"summary_failed", "conflict", "failed"})

DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_SUMMARY_TIMEOUT_S = 120.0
DEFAULT_CONCURRENCY = 4


class ConversationResult(BaseModel):
    """What the job did (or, in a dry run, would do) to one conversation."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str
    status: Status
    before: WindowSize | None = None  # the agent's window when last read
    after: WindowSize | None = None  # after the new batch (a dry run: what it would be)
    boundary_seq: int | None = None
    boundary_kind: BoundaryKind | None = None
    hidden: int = 0  # messages leaving the window
    hidden_range: tuple[int, int] | None = None  # their first and last seq
    retained: tuple[int, ...] = ()
    batch: int | None = None
    version: int | None = None
    summary_chars: int | None = None
    attempts: int = 0
    detail: str | None = None


class CompactionReport(BaseModel):
    """A run's results, one per conversation looked at."""

    model_config = ConfigDict(frozen=True)

    tenant: str
    agent_id: str
    dry_run: bool
    results: tuple[ConversationResult, ...]

    def count(self, status: Status) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def failed(self) -> bool:
        return any(r.status in FAILURES for r in self.results)


class CompactionJob:
    """Compacts one tenant's conversations (the repository's tenant) for one
    agent, as `policy` says, writing summaries with `summarizer`."""

    def __init__(
        self,
        repository: Repository,
        policy: CompactionPolicy,
        *,
        summarizer: Summarizer | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        summary_timeout: float = DEFAULT_SUMMARY_TIMEOUT_S,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        if max_attempts < 1 or concurrency < 1 or summary_timeout <= 0:
            raise ValueError("max_attempts, concurrency and summary_timeout must be positive")
        self.repository = repository
        self.policy = policy
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.max_attempts = max_attempts
        self.summary_timeout = summary_timeout
        self.concurrency = concurrency

    async def candidates(self, *, limit: int | None = None) -> list[CompactionCandidate]:
        """The tenant's conversations over a threshold now (at most `limit`)."""
        return [
            c
            async for c in find_candidates(
                self.repository.storage, self.repository.tenant, self.policy, limit=limit
            )
        ]

    async def run(
        self,
        *,
        conversation_ids: Sequence[str] | None = None,
        limit: int | None = None,
        dry_run: bool = False,
        on_start: Callable[[int], None] | None = None,
        on_result: Callable[[ConversationResult], None] | None = None,
    ) -> CompactionReport:
        """Compact the named conversations, or every candidate (at most
        `limit`). `on_start(total)` is called once the list is known,
        `on_result` after each conversation (for a progress bar)."""
        if conversation_ids is None:
            ids = [c.conversation_id for c in await self.candidates(limit=limit)]
        else:
            ids = list(dict.fromkeys(conversation_ids))[:limit]
        if on_start is not None:
            on_start(len(ids))
        results: list[ConversationResult | None] = [None] * len(ids)
        queue = iter(enumerate(ids))

        async def worker() -> None:
            for index, conversation_id in queue:
                result = await self.compact(conversation_id, dry_run=dry_run)
                results[index] = result
                if on_result is not None:
                    on_result(result)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.concurrency, len(ids))):
                    group.create_task(worker())
        except ExceptionGroup as group:
            # Not a conversation's failure (those are results) but a bug or
            # the storage going away: raise it as it is, not wrapped.
            raise group.exceptions[0] from None
        return CompactionReport(
            tenant=self.repository.tenant,
            agent_id=self.policy.agent_id,
            dry_run=dry_run,
            results=tuple(r for r in results if r is not None),
        )

    async def compact(self, conversation_id: str, *, dry_run: bool = False) -> ConversationResult:
        """Compact one conversation if it is over a threshold (see the module)."""
        problem = key_problem(conversation_id)
        if problem is not None:
            # Checked here, before the claim: a NUL would reach the database in its name.
            return ConversationResult(
                conversation_id=clip(conversation_id, 200), status="failed", detail=problem
            )
        # (Unit separators: ids and tenants are printable; PostgreSQL text holds no NUL.)
        claim = f"compaction\x1f{self.repository.tenant}\x1f{conversation_id}"
        try:
            async with self.repository.storage.try_claim(claim) as claimed:
                if not claimed:
                    return ConversationResult(
                        conversation_id=conversation_id,
                        status="claimed_elsewhere",
                        detail="another compaction job holds this conversation",
                    )
                return await self._attempts(conversation_id, dry_run=dry_run)
        except ConversationNotFound:
            return ConversationResult(conversation_id=conversation_id, status="not_found")
        except ConvoStoreError as error:
            return ConversationResult(
                conversation_id=conversation_id,
                status="failed",
                detail=f"{type(error).__name__}: {clip(str(error), 500)}",
            )

    async def _attempts(self, conversation_id: str, *, dry_run: bool) -> ConversationResult:
        ref = conversation_id
        agent = self.policy.agent_id
        summarized: tuple[tuple[tuple[int, str], ...], str] | None = None
        result = ConversationResult(conversation_id=conversation_id, status="conflict")
        for attempt in range(1, self.max_attempts + 1):
            version = (await self.repository.get_conversation(ref)).version
            window = await self.repository.visible_window(ref, agent_id=agent)
            blocks = await self.repository.tool_blocks(ref, pending_only=True, agent_id=agent)
            before = window_size([m for m in window if m.agent_id == agent])
            found = ConversationResult(
                conversation_id=conversation_id,
                status="below_threshold",
                before=before,
                version=version,
                attempts=attempt,
            )
            if not self.policy.exceeded(before.messages, before.tokens):
                return found
            plan = plan_compaction(
                window,
                agent_id=agent,
                pending_call_ids={b.call_id for b in blocks},
                policy=self.policy,
            )
            if isinstance(plan, NoPlan):
                return found.model_copy(
                    update={"status": "nothing_to_compact", "detail": plan.reason}
                )
            planned = found.model_copy(update=_plan_fields(plan))
            if dry_run:
                return planned.model_copy(
                    update={
                        "status": "planned",
                        "after": WindowSize(
                            messages=plan.kept.messages + 1, tokens=plan.kept.tokens
                        ),
                    }
                )
            covered = tuple((m.seq, m.text) for m in plan.hidden)
            if summarized is None or summarized[0] != covered:
                try:
                    summarized = (covered, await self._summary(conversation_id, plan))
                except Exception as error:  # a pluggable summarizer may raise anything
                    return planned.model_copy(
                        update={"status": "summary_failed", "detail": _failure(error)}
                    )
            summary = self._summary_message(summarized[1], plan)
            operation = StartBatch(
                agent_id=agent,
                boundary_seq=plan.boundary_seq,
                summary=summary,
                retain=plan.retain,
            )
            try:
                started = await self.repository.run_batch_operation(
                    ref, operation, expected_version=version
                )
            except (ConcurrencyConflict, ConversationBusy) as error:
                result = planned.model_copy(
                    update={"status": "conflict", "detail": clip(str(error), 500)}
                )
                # Let the writer finish its turn; capped, jittered backoff.
                await asyncio.sleep(random.uniform(0.5, 1.0) * min(0.005 * 2**attempt, 0.25))
                continue
            summary_tokens = estimate_message_tokens(summary, self.repository.limits.count_tokens)
            return planned.model_copy(
                update={
                    "status": "compacted",
                    "after": WindowSize(
                        messages=plan.kept.messages + 1,
                        tokens=plan.kept.tokens + summary_tokens,
                    ),
                    "batch": started.batch,
                    "version": started.version,
                    "summary_chars": len(summarized[1]),
                }
            )
        return result.model_copy(
            update={"detail": f"still changing after {self.max_attempts} attempts: {result.detail}"}
        )

    async def _summary(self, conversation_id: str, plan: CompactionPlan) -> str:
        async with asyncio.timeout(self.summary_timeout):
            text = await self.summarizer.summarize(
                plan.hidden, conversation_id=conversation_id, agent_id=self.policy.agent_id
            )
        return check_summary(text, max_chars=self.policy.max_summary_chars)

    def _summary_message(self, text: str, plan: CompactionPlan) -> Message:
        seqs = plan.hidden_seqs
        return Message(
            role=self.policy.summary_role,
            content=text,
            agent_id=self.policy.agent_id,
            kind=MessageKind.SUMMARY,
            metadata={
                "compaction": {
                    "covers": [min(seqs), max(seqs)],
                    "messages": len(seqs),
                    "summarizer": getattr(self.summarizer, "name", type(self.summarizer).__name__),
                }
            },
        )


def _plan_fields(plan: CompactionPlan) -> dict[str, Any]:
    seqs = plan.hidden_seqs
    return {
        "boundary_seq": plan.boundary_seq,
        "boundary_kind": plan.boundary_kind,
        "hidden": len(seqs),
        "hidden_range": (min(seqs), max(seqs)),
        "retained": plan.retain,
    }


def _failure(error: BaseException) -> str:
    if isinstance(error, SummaryRefused):
        return str(error)
    if isinstance(error, TimeoutError):
        return "the summarizer timed out"
    return f"the summarizer failed: {type(error).__name__}: {clip(str(error), 300)}"
