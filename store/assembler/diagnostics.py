"""Diagnostics: what the assembler decided and changed, for people and tests.

Every value is frozen and `model_dump(mode="json")`-able. Positions are
indexes into the neutral message list (system prompt first, if any) before
conversion to a provider's shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from enum import StrEnum
from functools import cached_property
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidatorFunctionWrapHandler,
    computed_field,
    model_validator,
)


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RepairKind(StrEnum):
    SYNTHESIZED_TOOL_RESULT = "synthesized_tool_result"
    DROPPED_ORPHAN_TOOL_RESULT = "dropped_orphan_tool_result"
    DROPPED_DUPLICATE_TOOL_RESULT = "dropped_duplicate_tool_result"
    MOVED_OUT_OF_TOOL_BLOCK = "moved_out_of_tool_block"
    DROPPED_EMPTY_TEXT = "dropped_empty_text"
    DROPPED_TOOL_RESULT_IMAGE = "dropped_tool_result_image"
    MERGED_SAME_ROLE = "merged_same_role"
    MERGED_FOR_ALTERNATION = "merged_for_alternation"
    INSERTED_USER_TURN = "inserted_user_turn"
    HOISTED_THINKING = "hoisted_thinking"
    STRIPPED_TRAILING_WHITESPACE = "stripped_trailing_whitespace"
    INLINE_REMINDER_FALLBACK = "inline_reminder_fallback"
    DROPPED_EMPTY_ASSISTANT_MESSAGE = "dropped_empty_assistant_message"
    RENAMED_DUPLICATE_TOOL_ID = "renamed_duplicate_tool_id"
    RENAMED_TOOL_ID = "renamed_tool_id"
    REPLACED_NON_FINITE_NUMBER = "replaced_non_finite_number"
    DROPPED_DUPLICATE_REASONING = "dropped_duplicate_reasoning"
    MOVED_TOOL_RESULT_IMAGES = "moved_tool_result_images"


class Repair(_Value):
    kind: RepairKind
    detail: str
    # Index into the neutral list for repairs made before conversion, or into
    # the provider's message list (`payload_index`) for repairs made during it.
    message_index: int | None = None
    payload_index: int | None = None


class SpecialBlockPlacement(_Value):
    policy: str
    n: int
    index: int | None  # None when no slot had content
    count: int
    slots: tuple[str, ...]
    distance_from_end: int | None  # messages after the block


class StablePrefix(_Value):
    """Everything before the special block: what a prefix cache can reuse.

    `fingerprint` (sha256 of the prefix as the provider sees it, defined in
    `store.assembler.fingerprint`) is computed when first read, and kept:
    the payload alone never needs it. It is a field like the others to
    `model_dump`, JSON, equality and the HTTP API.
    """

    tokens: int
    message_count: int
    _digest: Callable[[], str] = PrivateAttr()

    @model_validator(mode="wrap")
    @classmethod
    def _given_fingerprint(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # Read back from its JSON (`model_dump`), the fingerprint is a value.
        if not isinstance(data, dict) or "fingerprint" not in data:
            return handler(data)
        fields = dict(data)
        fingerprint = fields.pop("fingerprint")
        if not isinstance(fingerprint, str):
            raise ValueError("fingerprint must be a string")
        prefix = handler(fields)
        prefix._digest = functools.partial(str, fingerprint)
        return prefix

    @classmethod
    def of(cls, digest: Callable[[], str], *, tokens: int, message_count: int) -> StablePrefix:
        """The prefix whose fingerprint `digest()` computes, when asked."""
        prefix = cls(tokens=tokens, message_count=message_count)
        prefix._digest = digest
        return prefix

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def fingerprint(self) -> str:
        return self._digest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StablePrefix):
            return NotImplemented
        return (self.tokens, self.message_count, self.fingerprint) == (
            other.tokens,
            other.message_count,
            other.fingerprint,
        )

    def __hash__(self) -> int:
        return hash((self.tokens, self.message_count, self.fingerprint))


class BudgetTrim(_Value):
    budget: int
    dropped_messages: int
    dropped_tokens: int
    over_budget: bool  # still above budget after dropping all it may drop


class ToolResultClipping(_Value):
    """Tool results sent as head + marker + tail (`store.assembler.clipping`);
    the stored results are unchanged."""

    clipped: int  # results clipped in this payload
    cut_chars: int  # characters cut from them, in all
    call_ids: tuple[str, ...]  # the calls whose results were clipped


class ReasoningReplay(_Value):
    """What an `openai-chat` payload did with stored reasoning
    (`options.chat_reasoning`): assistant messages whose `reasoning_content`
    was sent back, those whose was left out by the option, and those whose
    reasoning is another provider's shape (Anthropic thinking, OpenAI
    Responses items, Gemini thoughts), which Chat has no field for."""

    mode: str
    replayed: int
    left_out: int
    other_providers: int


class Diagnostics(_Value):
    format: str
    agent_id: str
    system_prompt_source: str | None  # "custom" | "role_definition" | None
    special_block: SpecialBlockPlacement
    repairs: tuple[Repair, ...]
    token_estimate: int
    message_count: int  # neutral messages, system prompt and special block included
    stable_prefix: StablePrefix
    cache_breakpoints: tuple[str, ...]
    dropped_by_budget: BudgetTrim | None
    # None when no clipping limit was set.
    clipped_tool_results: ToolResultClipping | None = None
    # `openai-chat` only, when some assistant message carries reasoning.
    reasoning_replay: ReasoningReplay | None = None
