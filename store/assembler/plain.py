"""Building a payload straight from the stored JSON, when the window is plain.

Most windows need nothing from `assemble`'s passes: every message is text,
each tool call's results follow it at once, no call id is used twice or
refused by the provider, and the build asks for no budget, folding or
merging. For such a window sanitize, normalise and the renamings change
nothing, and making a `Message` of every row costs more than rendering it
(measured: docs/assembler.md, "Plain windows"). Here one loop over the
rows' dicts renders each message and checks that it is plain; the first
that is not hands the whole window to `assemble`, which decodes it. The
neutral messages (`Assembly.messages`) are decoded only when read; the
stable prefix's fingerprint, when read, is hashed off the rows
(`fingerprint.digest_rows`, or from the window's last build on:
`prefix_cache`); the special block is placed on a view that decodes only
the messages the policy looks at.

OpenAI Chat, OpenAI Responses and Anthropic have plain renderers
(`_PLAIN`, each a `_Target` told the window's messages one by one; a
window with reasoning the format replays, or for OpenAI Chat any
reasoning, is not plain for it); Gemini and
the XML protocol take the general path.
`tests/unit/assembler/test_plain.py` holds the two paths equal, value for
value, on windows that are plain and on windows that are not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

from store.assembler.assemble import MESSAGE_LIST, Assembly, Frame, assemble, parse_format
from store.assembler.diagnostics import StablePrefix, ToolResultClipping
from store.assembler.errors import EmptyWindow
from store.assembler.fingerprint import digest_rows
from store.assembler.formats import anthropic, openai_chat, openai_responses
from store.assembler.formats.common import Rendered, arguments_json
from store.assembler.formats.turns import Block, Turns
from store.assembler.options import AssembleOptions, ProviderFormat, ReminderStyle
from store.assembler.placement import special_block_index
from store.assembler.reminders import wrap_reminder
from store.assembler.sanitize import has_non_finite
from store.assembler.tool_ids import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, IdRule
from store.domain.codec import (
    StoredWindow,
    decode_row,
    decode_window,
    stored_arguments,
    stored_defaults,
)
from store.domain.context import AgentProfile, ContextSlots
from store.domain.messages import Message
from store.domain.tokens import MESSAGE_OVERHEAD, approximate_tokens, arguments_text

Row = Sequence[Any]
ANY_REASONING = "*"
# A tool call as a target is told it: id, name, arguments, and the
# arguments as JSON text (sorted keys, non-ASCII kept: `arguments_json`).
Call = tuple[str, str, dict[str, Any], str]


class _Target(Protocol):
    """A format's plain renderer: told each message of a plain window, in
    order, it renders them as `openai_chat.render` or the like would; then
    it lays out the payload with the system prompt and the special block."""

    #: The format's rule for call ids: an id it would rename is not plain.
    rule: IdRule
    #: The provider whose reasoning the format sends: a row that carries
    #: some is not plain (its replay has rules of its own); `ANY_REASONING`:
    #: a row with any reasoning is not plain (its diagnostics count it).
    replays: str | None

    def user(self, content: str) -> None: ...
    def system(self, content: str) -> None: ...
    def assistant(self, text: str, calls: list[Call]) -> None: ...
    def tool(self, call_id: str, content: str, is_error: bool) -> None: ...
    def payload(self, build: _Build) -> Rendered:
        """The payload, the special block's messages before message `build.at`."""


@dataclass(frozen=True)
class _Build:
    """What a target lays its payload out with."""

    frame: Frame
    at: int  # where the special block goes, a message index
    options: AssembleOptions


# How the stable prefix of a plain window is fingerprinted from its rows:
# `digest_rows`'s signature (format, system prompt, the prefix's rows).
PrefixDigest = Callable[[str, str | None, Sequence[Row]], str]


def assemble_stored(
    window: StoredWindow,
    *,
    profile: AgentProfile,
    slots: ContextSlots,
    format: ProviderFormat | str,
    options: AssembleOptions | None = None,
    prefix_digest: PrefixDigest = digest_rows,
) -> Assembly:
    """`assemble(window.messages(), ...)`: the same value, rendered from the
    stored JSON when the window is plain (see the module docstring).

    `prefix_digest`: how a plain window's stable prefix is fingerprinted
    when read, `digest_rows` or what gives the same digest (a storage's
    `PrefixCache`, which needs the rows a storage reads)."""
    options = options or AssembleOptions()
    provider = parse_format(format)
    plain = _PLAIN.get(provider)
    if plain is not None and _plain_options(options) and window.rows:
        target = plain()
        costs = _render(window.rows, profile.agent_id, target, _smallest_limit(options))
        if costs is not None:
            return _assembly(
                window.rows, target, costs, profile, slots, provider, options, prefix_digest
            )
    return assemble(
        window.messages(), profile=profile, slots=slots, format=provider, options=options
    )


def _smallest_limit(options: AssembleOptions) -> int | None:
    """The smallest tool-result limit: a result within it is sent whole
    whichever tool it came from."""
    limits = [
        *options.max_tool_result_chars_by_tool.values(),
        *([] if options.max_tool_result_chars is None else [options.max_tool_result_chars]),
    ]
    return min(limits) if limits else None


def _plain_options(options: AssembleOptions) -> bool:
    """Options under which a plain window's history is the window itself:
    nothing trimmed, folded or merged, estimated by the default counter.
    (A window with a tool result over a clipping limit is not plain.)"""
    return (
        options.token_budget is None
        and options.reminder_style is not ReminderStyle.INLINE
        and not options.merge_same_role
        and options.token_counter is approximate_tokens
    )


def _assembly(
    rows: Sequence[Row],
    target: _Target,
    costs: list[int],
    profile: AgentProfile,
    slots: ContextSlots,
    provider: ProviderFormat,
    options: AssembleOptions,
    prefix_digest: PrefixDigest,
) -> Assembly:
    """The assembly of a plain window, `assemble`'s steps on its rendered
    rows: the frame, the special block's place, the prefix, the diagnostics."""
    frame = Frame.of(profile, slots, options)
    block = frame.block
    size = len(rows)
    at = (
        special_block_index(_Decoded(rows), policy=options.policy, n=options.effective_n)
        if block
        else size
    )
    system_prompt = frame.choice.text
    prefix_tokens = sum(costs[:at])
    prefix = StablePrefix.of(
        functools.partial(prefix_digest, provider.value, system_prompt, rows[:at]),
        tokens=prefix_tokens + (0 if system_prompt is None else approximate_tokens(system_prompt)),
        message_count=at + (system_prompt is not None),
    )
    rendered = target.payload(_Build(frame, at, options))
    if not rendered.payload[MESSAGE_LIST[provider]]:
        raise EmptyWindow(provider.value, profile.agent_id)
    diagnostics = frame.diagnostics(
        format=provider,
        options=options,
        at=at,
        history_size=size,
        repairs=rendered.repairs,
        history_tokens=prefix_tokens + sum(costs[at:]),
        stable_prefix=prefix,
        cache_breakpoints=rendered.cache_breakpoints,
        dropped_by_budget=None,
        clipped=(
            None
            if _smallest_limit(options) is None
            else ToolResultClipping(clipped=0, cut_chars=0, call_ids=())
        ),
    )
    return Assembly(
        payload=rendered.payload,
        diagnostics=diagnostics,
        messages_of=functools.partial(_neutral, frame, rows, at),
    )


def _neutral(frame: Frame, rows: Sequence[Row], at: int) -> tuple[Message, ...]:
    return frame.neutral(frame.place(decode_window(rows), at))


class _Decoded(Sequence[Message]):
    """The window's messages, each decoded when first read: a placement
    policy looks at a few messages near the end."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self._rows = rows
        self._decoded: dict[int, Message] = {}

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self._rows)
        if not 0 <= index < len(self._rows):
            raise IndexError(index)
        message = self._decoded.get(index)
        if message is None:
            message = self._decoded[index] = decode_row(self._rows[index])
        return message


def _render(
    rows: Sequence[Row], agent_id: str, target: _Target, limit: int | None = None
) -> list[int] | None:
    """Tell `target` each row's message, and return each one's token
    estimate (`estimate_messages_tokens`); None at the first row that is
    not plain: another agent's, content that is not a string, reasoning the
    format replays, a result that does not follow its call's block, a block
    left unanswered, a call id used twice or one the format would rename,
    a non-finite argument, a tool result longer than `limit`."""
    costs: list[int] = []
    cost = costs.append
    user, system, assistant, tool = target.user, target.system, target.assistant, target.tool
    replays, accepts = target.replays, target.rule.accepts
    seen: set[str] = set()  # every call id so far
    waiting: set[str] = set()  # the current block's calls not answered yet
    no_content, main, no_reasoning, no_call_id, no_error, no_calls = stored_defaults(
        "content", "agent_id", "reasoning", "tool_call_id", "is_error", "tool_calls"
    )
    for row in rows:
        message = row[0]["message"]
        edit = row[1]
        content = message.get("content", no_content) if edit is None else edit["content"]
        if content.__class__ is not str or message.get("agent_id", main) != agent_id:
            return None
        tokens = MESSAGE_OVERHEAD + approximate_tokens(content)
        for block in message.get("reasoning", no_reasoning):
            if block["provider"] == replays or replays == ANY_REASONING:
                return None
            tokens += approximate_tokens(block.get("text") or "")
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id", no_call_id)
            if call_id not in waiting:  # an orphan, a second result, or out of its block
                return None
            if limit is not None and len(content) > limit:  # to be clipped
                return None
            waiting.discard(call_id)
            tool(call_id, content, message.get("is_error", no_error))
        elif waiting:  # a block interrupted or left unanswered
            return None
        elif role == "user":
            user(content)
        elif role == "assistant":
            rendered_calls: list[Call] = []
            for call in message.get("tool_calls", no_calls):
                call_id, name = call["id"], call["name"]
                arguments = stored_arguments(call)
                if call_id in seen or not accepts(call_id):
                    return None
                if arguments and has_non_finite(arguments):
                    return None
                seen.add(call_id)
                waiting.add(call_id)
                sent = arguments_json(arguments)
                counted = sent if sent.isascii() else arguments_text(arguments)
                tokens += approximate_tokens(name) + approximate_tokens(counted)
                rendered_calls.append((call_id, name, arguments, sent))
            assistant(content if content.strip() else "", rendered_calls)
        else:  # a system message mid-window
            system(content)
        cost(tokens)
    if waiting:
        return None
    return costs


class _OpenAIChat:
    """OpenAI Chat's messages (`formats.openai_chat.render`), one a message."""

    rule: IdRule = OPENAI_CHAT
    # OpenAI-compatible endpoints' `reasoning_content`, and a count of the
    # other providers' reasoning left out: both in the diagnostics.
    replays: str | None = ANY_REASONING

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def user(self, content: str) -> None:
        self.messages.append({"role": "user", "content": content})

    def system(self, content: str) -> None:
        self.messages.append({"role": "system", "content": content})

    def assistant(self, text: str, calls: list[Call]) -> None:
        if not calls:
            self.messages.append({"role": "assistant", "content": text})
            return
        self.messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, _, a in calls
                ],
            }
        )

    def tool(self, call_id: str, content: str, is_error: bool) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def payload(self, build: _Build) -> Rendered:
        messages, at, system_prompt = self.messages, build.at, build.frame.choice.text
        head = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
        rendered_block = [openai_chat.render_message(m) for m in build.frame.block]
        return Rendered(
            payload={"messages": [*head, *messages[:at], *rendered_block, *messages[at:]]}
        )


class _OpenAIResponses:
    """OpenAI Responses' input items (`formats.openai_responses.render`):
    an assistant message may give two or more (its text, its calls)."""

    rule: IdRule = OPENAI_RESPONSES
    replays: str | None = "openai"

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.starts: list[int] = []  # each message's first item
        self.item_ids = openai_responses.ItemIds()

    def user(self, content: str) -> None:
        self.starts.append(len(self.items))
        self.items.append(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": content}],
            }
        )

    def system(self, content: str) -> None:
        self.starts.append(len(self.items))
        self.items.append(
            {
                "type": "message",
                "role": openai_responses.MID_CONVERSATION_SYSTEM_ROLE,
                "content": [{"type": "input_text", "text": content}],
            }
        )

    def assistant(self, text: str, calls: list[Call]) -> None:
        self.starts.append(len(self.items))
        items = self.items
        if text:
            items.append(openai_responses.assistant_text_item(text, self.item_ids))
        for call_id, name, _, arguments in calls:
            items.append(
                {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
            )

    def tool(self, call_id: str, content: str, is_error: bool) -> None:
        self.starts.append(len(self.items))
        self.items.append({"type": "function_call_output", "call_id": call_id, "output": content})

    def payload(self, build: _Build) -> Rendered:
        items, at, system_prompt = self.items, build.at, build.frame.choice.text
        cut = self.starts[at] if at < len(self.starts) else len(items)
        rendered_block = [
            item
            for m in build.frame.block
            for item in openai_responses.render_items(m, {}, self.item_ids)
        ]
        payload: dict[str, Any] = {} if system_prompt is None else {"instructions": system_prompt}
        payload["input"] = [*items[:cut], *rendered_block, *items[cut:]]
        return Rendered(payload=payload)


class _Anthropic:
    """Anthropic's turns (`formats.anthropic.render`): each message's
    blocks are kept, then added to the turns in order, the special block's
    at its place (neighbours of one role merge into one turn, so the block
    cannot be spliced in afterwards)."""

    rule: IdRule = ANTHROPIC
    replays: str | None = "anthropic"  # thinking blocks: signatures, their own rules

    def __init__(self) -> None:
        # Per message: its role, its blocks, how many lead, and for a
        # result sent without its whitespace-only text, its call id.
        self.pieces: list[tuple[str, list[Block], int, str | None]] = []

    def user(self, content: str) -> None:
        blocks = [{"type": "text", "text": content}] if content.strip() else []
        self.pieces.append(("user", blocks, 0, None))

    def system(self, content: str) -> None:
        text = wrap_reminder(content)
        self.pieces.append(("user", [{"type": "text", "text": text}], 0, None))

    def assistant(self, text: str, calls: list[Call]) -> None:
        blocks: list[Block] = [{"type": "text", "text": text}] if text else []
        for call_id, name, arguments, _ in calls:
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
        self.pieces.append(("assistant", blocks, 0, None))

    def tool(self, call_id: str, content: str, is_error: bool) -> None:
        block, blank = anthropic.tool_result_block(call_id, content, is_error=is_error)
        self.pieces.append(("user", [block], 1, call_id if blank else None))

    def payload(self, build: _Build) -> Rendered:
        turns = Turns(user_role="user", content_key="content")
        add = turns.add
        pieces, at, frame = self.pieces, build.at, build.frame
        before_special = None
        for index, (role, blocks, lead, blank) in enumerate(pieces):
            if index == at and frame.block:
                before_special = self._add_block(turns, frame.block)
            add(role, blocks, lead)
            if blank is not None:
                anthropic.blank_result(turns, blank)
        if at >= len(pieces) and frame.block:
            before_special = self._add_block(turns, frame.block)
        elif not frame.block:
            before_special = turns.last_block()
        return anthropic.finish(
            turns,
            before_special,
            frame.choice.text,
            cache_breakpoints=build.options.cache_breakpoints,
            renamed=[],
        )

    @staticmethod
    def _add_block(turns: Turns, block: list[Message]) -> tuple[int, int] | None:
        """Add the special block's messages; the last block before them."""
        before = turns.last_block()
        for message in block:
            turns.add("user", anthropic.user_blocks(message))
        return before


# The formats with a plain renderer; the others always take `assemble`.
_PLAIN: dict[ProviderFormat, Callable[[], _Target]] = {
    ProviderFormat.OPENAI_CHAT: _OpenAIChat,
    ProviderFormat.OPENAI_RESPONSES: _OpenAIResponses,
    ProviderFormat.ANTHROPIC: _Anthropic,
}
