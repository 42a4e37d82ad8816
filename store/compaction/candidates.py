"""Selection: which of a tenant's conversations a compaction job looks at.

The storage port's `compaction_candidates` (PostgreSQL and memory) answers
one page of conversations whose agent's current window is over a
threshold, in creation order; `find_candidates` pages through them.

What it costs on PostgreSQL (`store.postgres.candidates.page_statement`):
the exact size of a window is a count over its batch's members — O(window)
per conversation, never the history. With a message threshold alone, most
conversations are ruled out before that count from their stream row and
their current batch's row: a window never holds more than
`next_seq - floor(boundary) + len(retained) + 1` messages (everything from
the boundary on, the retained ones, the summary), so a conversation whose
bound is within the threshold — every conversation compacted recently — is
skipped without touching a message. A token threshold has no such bound
from the head columns: those windows are summed (their members only).

The job re-checks every candidate after claiming it (another job may have
compacted it meanwhile), so a page is a hint, never a promise.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from store.compaction.policy import CompactionPolicy
from store.repository.port import (
    DEFAULT_CANDIDATE_PAGE,
    CandidateCursor,
    CandidateQuery,
    CompactionCandidate,
    Storage,
)


async def find_candidates(
    storage: Storage,
    tenant: str,
    policy: CompactionPolicy,
    *,
    limit: int | None = None,
    page_size: int = DEFAULT_CANDIDATE_PAGE,
) -> AsyncIterator[CompactionCandidate]:
    """Every candidate of `tenant` (at most `limit`), page by page."""
    after: CandidateCursor | None = None
    found = 0
    while limit is None or found < limit:
        size = page_size if limit is None else min(page_size, limit - found)
        page = await storage.compaction_candidates(
            tenant,
            CandidateQuery(
                agent_id=policy.agent_id,
                max_messages=policy.max_messages,
                max_tokens=policy.max_tokens,
                after=after,
                limit=size,
            ),
        )
        for candidate in page:
            yield candidate
        found += len(page)
        if len(page) < size:
            return
        after = page[-1].cursor
