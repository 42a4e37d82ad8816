"""`assemble`: stored messages + agent profile + context slots + options →
the provider request body and its diagnostics. Pure: no I/O, no clock, same
input → same output.

The pipeline, in order (each step in its own module):
1. choose the system prompt; refuse a sub-agent without a role definition;
2. keep only this agent's messages;
3. rename reused call ids and spell non-finite argument numbers as text
   (`sanitize`, always), then make tool blocks contiguous and repair the
   window (`repair`);
4. clip tool results over their limit (`clipping`), then trim the oldest
   turns to the token budget (`budget`), then refuse tool images over
   their size limits (`tool_images`);
5. fold reminders into the last user message if `reminder_style="inline"`;
6. place the special block (`placement`) on that list — the one the
   provider will see;
7. optionally merge same-role neighbours (`merge`), then render the format;
   a format left with no message raises `EmptyWindow` (nothing is invented).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from store.assembler.budget import trim_to_budget
from store.assembler.clipping import clip_tool_results
from store.assembler.diagnostics import (
    BudgetTrim,
    Diagnostics,
    ReasoningReplay,
    Repair,
    SpecialBlockPlacement,
    StablePrefix,
    ToolResultClipping,
)
from store.assembler.errors import EmptyWindow
from store.assembler.fingerprint import stable_prefix
from store.assembler.formats import anthropic, gemini, openai_chat, openai_responses, xml_tools
from store.assembler.formats.common import Conversation, Rendered
from store.assembler.merge import merge_same_role
from store.assembler.options import AssembleOptions, ProviderFormat, ReminderStyle
from store.assembler.placement import special_block_index
from store.assembler.reminders import inline_reminders
from store.assembler.repair import normalise_window
from store.assembler.sanitize import sanitize_window
from store.assembler.special_block import SPECIAL_SLOT, special_block
from store.assembler.system_prompt import SystemPromptChoice, choose_system_prompt
from store.assembler.tool_images import check_tool_images
from store.domain.context import AgentProfile, ContextSlots
from store.domain.messages import Message
from store.domain.tokens import estimate_messages_tokens


@dataclass(frozen=True, kw_only=True, eq=False)
class Assembly:
    """The request body for the provider SDK, and what was decided to build it.

    `messages` is the neutral list the positions in the diagnostics index
    into: the system prompt (if any) first, then the placed history. It is
    made when first read (`messages_of()`): a build from stored JSON
    (`store.assembler.plain`) makes no `Message` until then.
    """

    payload: dict[str, Any]
    diagnostics: Diagnostics
    messages_of: Callable[[], tuple[Message, ...]] = field(repr=False)

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        return self.messages_of()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Assembly):
            return NotImplemented
        return (self.payload, self.diagnostics, self.messages) == (
            other.payload,
            other.diagnostics,
            other.messages,
        )

    __hash__ = None  # type: ignore[assignment]  # holds a dict: as a dataclass with eq would


# Where each format's messages go: none of them takes an empty list.
MESSAGE_LIST = {
    ProviderFormat.OPENAI_CHAT: "messages",
    ProviderFormat.OPENAI_RESPONSES: "input",
    ProviderFormat.ANTHROPIC: "messages",
    ProviderFormat.GEMINI: "contents",
    ProviderFormat.XML_TOOLS: "messages",
}


@dataclass(frozen=True, kw_only=True)
class Frame:
    """What a build adds around the window: the system prompt (as chosen
    for the agent), the special block's messages, and their token estimate."""

    agent_id: str
    choice: SystemPromptChoice
    system: Message | None
    block: list[Message]
    tokens: int

    @classmethod
    def of(cls, profile: AgentProfile, slots: ContextSlots, options: AssembleOptions) -> Frame:
        count = options.token_counter
        choice = choose_system_prompt(profile)
        system = (
            Message(role="system", content=choice.text, agent_id=profile.agent_id)
            if choice.text is not None
            else None
        )
        block = special_block(
            choice.role_definition,
            slots,
            agent_id=profile.agent_id,
            sub_agent=profile.is_sub_agent,
            useful_info_items=options.useful_info_items,
            folder_notes_per_folder=options.folder_notes_per_folder,
        )
        tokens = sum(estimate_messages_tokens([*([system] if system else []), *block], count))
        return cls(
            agent_id=profile.agent_id, choice=choice, system=system, block=block, tokens=tokens
        )

    def place(self, history: Sequence[Message], at: int) -> list[Message]:
        """`history` with the special block inserted before message `at`."""
        return [*history[:at], *self.block, *history[at:]]

    def neutral(self, placed: Sequence[Message]) -> tuple[Message, ...]:
        """The neutral list: the system prompt (if any), then `placed`."""
        return (*([self.system] if self.system is not None else []), *placed)

    def diagnostics(
        self,
        *,
        format: ProviderFormat,
        options: AssembleOptions,
        at: int,
        history_size: int,
        repairs: tuple[Repair, ...],
        history_tokens: int,
        stable_prefix: StablePrefix,
        cache_breakpoints: tuple[str, ...],
        dropped_by_budget: BudgetTrim | None,
        clipped: ToolResultClipping | None = None,
        reasoning: ReasoningReplay | None = None,
    ) -> Diagnostics:
        """The build's diagnostics, its special block placed at `at` in a
        history of `history_size` messages."""
        block = self.block
        offset = 1 if self.system is not None else 0
        return Diagnostics(
            format=format.value,
            agent_id=self.agent_id,
            system_prompt_source=self.choice.source,
            special_block=SpecialBlockPlacement(
                policy=options.policy.value,
                n=options.effective_n,
                index=at + offset if block else None,
                count=len(block),
                slots=tuple(str(m.metadata[SPECIAL_SLOT]) for m in block),
                distance_from_end=history_size - at if block else None,
            ),
            repairs=repairs,
            token_estimate=self.tokens + history_tokens,
            message_count=offset + history_size + len(block),
            stable_prefix=stable_prefix,
            cache_breakpoints=cache_breakpoints,
            dropped_by_budget=dropped_by_budget,
            clipped_tool_results=clipped,
            reasoning_replay=reasoning,
        )


def parse_format(format: ProviderFormat | str) -> ProviderFormat:
    try:
        return ProviderFormat(format)
    except ValueError:
        known = ", ".join(f.value for f in ProviderFormat)
        raise ValueError(f"unknown provider format {format!r}; expected one of: {known}") from None


def _render(
    format: ProviderFormat, conversation: Conversation, options: AssembleOptions
) -> Rendered:
    if format is ProviderFormat.OPENAI_CHAT:
        return openai_chat.render(conversation, options.chat_reasoning)
    if format is ProviderFormat.OPENAI_RESPONSES:
        return openai_responses.render(conversation)
    if format is ProviderFormat.ANTHROPIC:
        return anthropic.render(conversation, cache_breakpoints=options.cache_breakpoints)
    if format is ProviderFormat.GEMINI:
        return gemini.render(conversation)
    return xml_tools.render(
        conversation,
        final_instruction=options.xml_final_instruction,
        user_question=options.xml_user_question,
    )


def assemble(
    messages: Sequence[Message],
    *,
    profile: AgentProfile,
    slots: ContextSlots,
    format: ProviderFormat | str,
    options: AssembleOptions | None = None,
) -> Assembly:
    options = options or AssembleOptions()
    provider = parse_format(format)
    count = options.token_counter
    frame = Frame.of(profile, slots, options)
    choice, fixed = frame.choice, frame.tokens

    agent_id = profile.agent_id
    window, repairs = sanitize_window([m for m in messages if m.agent_id == agent_id])
    history, repaired = normalise_window(window, repair=options.repair)
    repairs.extend(repaired)
    # Clip first: the budget then drops whole turns only if clipped results
    # still do not fit.
    history, clipped = clip_tool_results(
        history, options.max_tool_result_chars, options.max_tool_result_chars_by_tool
    )

    # Token estimates are computed once per message and shared by the budget,
    # the stable prefix and the diagnostics.
    costs: list[int] | None = None
    trim: BudgetTrim | None = None
    if options.token_budget is not None:
        costs = estimate_messages_tokens(history, count)
        history, trim = trim_to_budget(
            history, fixed_tokens=fixed, budget=options.token_budget, count=count, costs=costs
        )
        costs = costs[trim.dropped_messages :]
    # After the budget: images in dropped turns are not sent.
    check_tool_images(
        history,
        per_image=options.max_tool_image_bytes,
        per_payload=options.max_tool_images_bytes,
    )
    if options.reminder_style is ReminderStyle.INLINE:
        history, folded = inline_reminders(history)
        repairs.extend(folded)
        costs = None  # a user message may have changed

    at = special_block_index(history, policy=options.policy, n=options.effective_n)
    placed = frame.place(history, at)
    before_block = at if frame.block else len(history)
    seen_prefix: Sequence[Message] = history[:before_block]
    if provider is ProviderFormat.OPENAI_CHAT and any(m.reasoning for m in history):
        # Chat sends a message's reasoning or not by where the tool loop
        # starts, which a later message moves: the prefix is fingerprinted
        # with the reasoning it is sent with (its estimate stays the stored one).
        if costs is None:
            costs = estimate_messages_tokens(history, count)
        seen_prefix = openai_chat.sent_reasoning(history, options.chat_reasoning)[:before_block]
    # Without costs yet, the prefix's are estimated in the fingerprint's pass.
    prefix, prefix_tokens = stable_prefix(
        format=provider.value,
        system_prompt=choice.text,
        prefix=seen_prefix,
        count=count,
        costs=None if costs is None else costs[:before_block],
    )
    history_tokens = (
        sum(costs)
        if costs is not None
        else prefix_tokens + sum(estimate_messages_tokens(history[before_block:], count))
    )

    to_render = placed
    if options.merge_same_role:
        to_render, merged = merge_same_role(placed)
        repairs.extend(merged)
    rendered = _render(
        provider, Conversation(system_prompt=choice.text, history=tuple(to_render)), options
    )
    if not rendered.payload[MESSAGE_LIST[provider]]:
        raise EmptyWindow(provider.value, profile.agent_id)

    diagnostics = frame.diagnostics(
        format=provider,
        options=options,
        at=at,
        history_size=len(history),
        repairs=(*repairs, *rendered.repairs),
        history_tokens=history_tokens,
        stable_prefix=prefix,
        cache_breakpoints=rendered.cache_breakpoints,
        dropped_by_budget=trim,
        clipped=clipped,
        reasoning=rendered.reasoning,
    )
    return Assembly(
        payload=rendered.payload,
        diagnostics=diagnostics,
        messages_of=functools.partial(frame.neutral, placed),
    )
