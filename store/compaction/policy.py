"""What a compaction job aims for: when a window is too long, what stays.

A `CompactionPolicy` is a frozen value checked on construction (the CLI's
options and the HTTP body become one; a refusal names the field, and
`policy_refusal` turns pydantic's error into the store's
`InvalidOperation`). It says:

- when an agent's visible window is too long: more than `max_messages`
  messages or more than `max_tokens` tokens (the stored `token_estimate`s
  summed) — at least one of the two;
- how much a compaction keeps after its boundary: the tail may hold at most
  `target_ratio` of each threshold, so a run leaves room to grow and a
  second run right after finds nothing to do;
- what is kept from before the boundary: system messages (never an earlier
  summary: it is folded into the new one), pinned messages, and the last
  `keep_last[role]` messages of each role;
- how the summary is written: its role and its largest accepted size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from store.domain.errors import InvalidOperation
from store.domain.inputs import AgentId
from store.domain.messages import MAIN_AGENT, ROLES, Role

MAX_THRESHOLD = 100_000_000
MAX_KEEP_LAST = 1_000
DEFAULT_MAX_SUMMARY_CHARS = 8_000
MAX_SUMMARY_CHARS = 100_000

Threshold = Annotated[int, Field(strict=True, ge=1, le=MAX_THRESHOLD)]
KeepLast = Annotated[int, Field(strict=True, ge=0, le=MAX_KEEP_LAST)]


class CompactionPolicy(BaseModel):
    """When to compact an agent's window, and what a compaction keeps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_messages: Threshold | None = Field(
        default=None, description="Compact a window holding more messages than this."
    )
    max_tokens: Threshold | None = Field(
        default=None,
        description="Compact a window whose messages' token estimates add up to more than this.",
    )
    keep_last: Mapping[Role, KeepLast] = Field(
        default_factory=dict,
        description='Per role, how many of its last messages stay visible (e.g. {"user": 2}).',
    )
    agent_id: AgentId = Field(default=MAIN_AGENT, description="The agent whose window to compact.")
    target_ratio: float = Field(
        default=0.5,
        ge=0.05,
        le=0.95,
        description="After the boundary, keep at most this share of each threshold.",
    )
    summary_role: Literal["system", "user"] = Field(
        default="system", description="The role of the summary message (its kind is `summary`)."
    )
    max_summary_chars: int = Field(
        default=DEFAULT_MAX_SUMMARY_CHARS,
        strict=True,
        ge=1,
        le=MAX_SUMMARY_CHARS,
        description="A longer summary is refused: the conversation stays as it was.",
    )

    @model_validator(mode="after")
    def _a_threshold(self) -> Self:
        if self.max_messages is None and self.max_tokens is None:
            raise ValueError("name a threshold: max_messages, max_tokens or both")
        return self

    def exceeded(self, messages: int, tokens: int) -> bool:
        """Whether a window of this size is too long."""
        return (self.max_messages is not None and messages > self.max_messages) or (
            self.max_tokens is not None and tokens > self.max_tokens
        )

    def tail_fits(self, messages: int, tokens: int) -> bool:
        """Whether what follows a boundary is short enough to keep whole."""
        return (
            self.max_messages is None or messages <= self.max_messages * self.target_ratio
        ) and (self.max_tokens is None or tokens <= self.max_tokens * self.target_ratio)


def policy_refusal(error: ValidationError) -> InvalidOperation:
    """The store's error for a policy that failed validation, naming the fields."""
    problems = []
    for e in error.errors():
        where = ".".join(str(p) for p in e["loc"])
        problems.append(f"{where}: {e['msg']}" if where else e["msg"])
    return InvalidOperation("invalid compaction policy: " + "; ".join(problems))


def parse_keep_last(items: list[str] | tuple[str, ...]) -> dict[Role, int]:
    """`ROLE=N` strings (the CLI's `--keep-last user=2`) as a mapping, or
    InvalidOperation naming the item."""
    found: dict[Role, int] = {}
    for item in items:
        role, sep, count = item.partition("=")
        role = role.strip()
        if not sep or role not in ROLES:
            raise InvalidOperation(
                f"--keep-last takes ROLE=N with a role of {', '.join(ROLES)}, got {item!r}"
            )
        try:
            n = int(count)
        except ValueError:
            raise InvalidOperation(
                f"--keep-last {role}= needs a whole number, got {count!r}"
            ) from None
        if not 0 <= n <= MAX_KEEP_LAST:
            raise InvalidOperation(f"--keep-last {role} must be 0..{MAX_KEEP_LAST}, got {n}")
        found[role] = n
    return found
