"""Compaction over HTTP: the job of `convo compact`, for the key's tenant.

- `POST /compactions` (`compactConversations`): every conversation of the
  tenant whose agent's window is over a threshold (at most `limit`), or the
  ones named in `conversation_ids`; answers each one's plan (`dry_run`) or
  result. A conversation that is not the tenant's is reported `not_found`,
  exactly like a missing one.
- `POST /conversations/{id}/compact` (`compactConversation`): one
  conversation; 404 / 410 / 409 as every write to it.

The body is the job's policy (`store.compaction.CompactionPolicy`: the
thresholds and what is kept) plus what to run it on, and which summarizer
writes the summaries: the default, extractive one, or `openai-compatible`,
a model configured by the server's settings (`CONVO_SUMMARIZER_*`;
docs/compaction.md). Asking for a model summarizer the server has no
settings for is a 422 naming them, before anything is read.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import ConfigDict, Field

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS, WRITE_ERRORS
from api.routing import JSONRoute
from api.schemas import ConversationIdPath, ConversationKey
from hosting.settings import Settings
from store.compaction import (
    CompactionJob,
    CompactionPolicy,
    CompactionReport,
    ConversationResult,
    ExtractiveSummarizer,
    Summarizer,
    SummarizerName,
    make_summarizer,
)
from store.domain.errors import ConversationIsArchived, ConversationNotFound

MAX_COMPACTIONS_PER_REQUEST = 1_000
DEFAULT_COMPACTIONS_PER_REQUEST = 100

router = APIRouter(tags=["compaction"], route_class=JSONRoute)

# Checked as every conversation id is (1-200 printable characters), so a
# NUL or a control character is a 422 here, never a statement that fails.
ConversationIdItem = ConversationKey


class CompactConversationRequest(CompactionPolicy):
    """The policy (at least one threshold), and whether to only plan."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"max_messages": 400, "keep_last": {"user": 2}, "dry_run": True}]
        }
    )

    dry_run: bool = Field(
        default=False, strict=True, description="Answer the plan; change nothing."
    )
    summarizer: SummarizerName = Field(
        default="extractive",
        description="Who writes the summaries: `extractive` (no model) or `openai-compatible` "
        "(the model the server's CONVO_SUMMARIZER_* settings name).",
    )


class CompactionsRequest(CompactConversationRequest):
    """The policy, whether to only plan, and which conversations."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"max_tokens": 60000, "keep_last": {"user": 2, "tool": 4}, "limit": 100},
                {"max_messages": 400, "conversation_ids": ["user-123"], "dry_run": True},
            ]
        }
    )

    conversation_ids: (
        Annotated[list[ConversationIdItem], Field(min_length=1, max_length=1_000)] | None
    ) = Field(
        default=None,
        description="Only these conversations (default: every one over a threshold).",
    )
    limit: int = Field(
        default=DEFAULT_COMPACTIONS_PER_REQUEST,
        strict=True,
        ge=1,
        le=MAX_COMPACTIONS_PER_REQUEST,
        description="Look at most at this many conversations.",
    )


def _summarizer(body: CompactConversationRequest) -> Summarizer:
    if body.summarizer == "extractive":
        return ExtractiveSummarizer()
    # The settings the server was started with come from the environment.
    settings = Settings.from_env()
    key = settings.summarizer_api_key
    return make_summarizer(
        body.summarizer,
        url=None if settings.summarizer_url is None else str(settings.summarizer_url),
        model=settings.summarizer_model,
        api_key=None if key is None else key.get_secret_value(),
        timeout=settings.summarizer_timeout_s,
    )


def _policy(body: CompactConversationRequest) -> CompactionPolicy:
    return CompactionPolicy.model_validate(
        body.model_dump(include=set(CompactionPolicy.model_fields))
    )


@router.post(
    "/compactions",
    operation_id="compactConversations",
    summary="Compact the conversations whose window is too long",
    responses={k: v for k, v in WRITE_ERRORS.items() if k not in (404, 410, 409)},
)
async def compact_conversations(
    body: CompactionsRequest, repository: RepositoryDep, request: Request
) -> CompactionReport:
    """Start a new batch, led by a summary, for each conversation of the
    key's tenant whose agent's window is over a threshold (or each one
    named). Nothing is deleted. With `dry_run`: where each boundary would
    go and what would be kept, changing nothing. Each conversation's
    `status` says what happened; a failed summary or writers that kept a
    conversation changing are reported there, and leave it as it was."""
    job = CompactionJob(repository, _policy(body), summarizer=_summarizer(body))
    report = await job.run(
        conversation_ids=body.conversation_ids, limit=body.limit, dry_run=body.dry_run
    )
    request.app.state.metrics.compacted(
        dry_run=body.dry_run, conversations=report.count("compacted")
    )
    return report


@router.post(
    "/conversations/{conversation_id}/compact",
    operation_id="compactConversation",
    summary="Compact one conversation if its window is too long",
    responses=WRITE_ERRORS | CONVERSATION_ERRORS,
)
async def compact_conversation(
    conversation_id: ConversationIdPath,
    body: CompactConversationRequest,
    repository: RepositoryDep,
    request: Request,
) -> ConversationResult:
    """As `POST /compactions` for this one conversation: its result (or,
    with `dry_run`, its plan). Below the thresholds, nothing happens
    (`below_threshold`)."""
    summarizer = _summarizer(body)
    conversation = await repository.get_conversation(conversation_id)
    if conversation.archived:
        raise ConversationIsArchived(conversation_id)
    result = await CompactionJob(repository, _policy(body), summarizer=summarizer).compact(
        str(conversation.id), dry_run=body.dry_run
    )
    if result.status == "not_found":  # deleted meanwhile
        raise ConversationNotFound(conversation_id)
    request.app.state.metrics.compacted(
        dry_run=body.dry_run, conversations=int(result.status == "compacted")
    )
    return result
