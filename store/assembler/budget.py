"""Token budget: drop the oldest visible turns until the payload fits.

A turn is a unit that never splits: a whole tool-call block, or one other
message. The system prompt and the special block are never dropped (they
are counted in `fixed_tokens`), and the newest unit is always kept so the
provider gets at least one message; if even that does not fit, the trim
says `over_budget`.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.assembler.diagnostics import BudgetTrim
from store.assembler.tool_blocks import units
from store.domain.messages import Message
from store.domain.tokens import TokenCounter, estimate_messages_tokens


def trim_to_budget(
    history: Sequence[Message],
    *,
    fixed_tokens: int,
    budget: int,
    count: TokenCounter,
    costs: Sequence[int] | None = None,
) -> tuple[list[Message], BudgetTrim]:
    """`costs`: each message's token estimate, when the caller already has them."""
    if costs is None:
        costs = estimate_messages_tokens(history, count)
    total = fixed_tokens + sum(costs)
    spans = units(history)
    keep_from = 0
    dropped_tokens = 0
    for start, end in spans[:-1]:
        if total - dropped_tokens <= budget:
            break
        dropped_tokens += sum(costs[start : end + 1])
        keep_from = end + 1
    trim = BudgetTrim(
        budget=budget,
        dropped_messages=keep_from,
        dropped_tokens=dropped_tokens,
        over_budget=total - dropped_tokens > budget,
    )
    return list(history[keep_from:]), trim
