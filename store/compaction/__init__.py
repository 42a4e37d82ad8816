"""Compaction: start a new batch, led by a summary, for each conversation
whose agent's window has grown too long. Nothing is deleted: the messages
that leave the window stay in the log and in every earlier batch.

One idea per module:

- `policy`: the thresholds, the retention rules, the summary's limits;
- `candidates`: which conversations of a tenant are over a threshold;
- `plan`: where the boundary goes and what is kept (pure);
- `summarizer`: the `Summarizer` protocol and the default, extractive one;
- `choice`: a summarizer by name (`extractive`, `openai-compatible`);
- `openai_compatible`: an example summarizer for any OpenAI-compatible
  endpoint (imported on its own: it needs httpx);
- `job`: the runner — claims, retries on concurrent writes, reports.

Run it as `convo compact` or `POST /compactions`; docs/compaction.md says
how, and what it guarantees.
"""

from store.compaction.choice import SUMMARIZER_NAMES, SummarizerName, make_summarizer
from store.compaction.job import (
    STATUSES,
    CompactionJob,
    CompactionReport,
    ConversationResult,
    Status,
)
from store.compaction.plan import CompactionPlan, NoPlan, WindowSize, plan_compaction
from store.compaction.policy import CompactionPolicy, parse_keep_last, policy_refusal
from store.compaction.summarizer import (
    ExtractiveSummarizer,
    Summarizer,
    SummaryRefused,
    check_summary,
)
from store.repository.port import CandidateCursor, CandidateQuery, CompactionCandidate

__all__ = [
    "STATUSES",
    "SUMMARIZER_NAMES",
    "CandidateCursor",
    "CandidateQuery",
    "CompactionCandidate",
    "CompactionJob",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionReport",
    "ConversationResult",
    "ExtractiveSummarizer",
    "NoPlan",
    "Status",
    "Summarizer",
    "SummarizerName",
    "SummaryRefused",
    "WindowSize",
    "check_summary",
    "make_summarizer",
    "parse_keep_last",
    "plan_compaction",
    "policy_refusal",
]
