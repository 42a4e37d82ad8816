"""Building a payload straight from the stored JSON, when the window is plain.

Most windows need nothing from `assemble`'s passes: every message is text,
each tool call's results follow it at once, no call id is used twice or
refused by the provider, and the build asks for no budget, folding or
merging. For such a window sanitize, normalise and the renamings change
nothing, and making a `Message` of every row cost more than rendering it:
of a cold 5,000-message OpenAI Chat build, decoding the rows was 10 ms and
the passes 18, against 25 for the fetch (docs/assembler.md, "Plain
windows"). Here one loop over the rows' dicts renders each message and
checks that it is plain; the first that is not hands the whole window to
`assemble`, which decodes it. The neutral messages (`Assembly.messages`)
are decoded only when read; the stable prefix's fingerprint, when read, is
hashed off the rows (`fingerprint.digest_rows`); the special block is
placed on a view that decodes only the messages the policy looks at.

Only OpenAI Chat has a plain renderer so far (`_PLAIN`): every other
format takes the general path. `tests/unit/assembler/test_plain.py` holds
the two paths equal, value for value, on windows that are plain and on
windows that are not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, overload

from store.assembler.assemble import Assembly, Frame, assemble, parse_format
from store.assembler.diagnostics import StablePrefix
from store.assembler.fingerprint import digest_rows
from store.assembler.formats.common import arguments_json
from store.assembler.formats.openai_chat import render_message
from store.assembler.options import AssembleOptions, ProviderFormat, ReminderStyle
from store.assembler.placement import special_block_index
from store.assembler.sanitize import has_non_finite
from store.assembler.tool_ids import OPENAI_CHAT
from store.codec import StoredWindow, decode_row, decode_window
from store.context import AgentProfile, ContextSlots
from store.messages import MAIN_AGENT, Message
from store.tokens import MESSAGE_OVERHEAD, approximate_tokens, arguments_text

Row = Sequence[Any]
# A plain renderer: the window's provider messages and each one's token
# estimate, or None when a row is not plain.
Rendered = tuple[list[dict[str, Any]], list[int]]
PlainRenderer = Callable[[Sequence[Row], str], Rendered | None]


def assemble_stored(
    window: StoredWindow,
    *,
    profile: AgentProfile,
    slots: ContextSlots,
    format: ProviderFormat | str,
    options: AssembleOptions | None = None,
) -> Assembly:
    """`assemble(window.messages(), ...)`: the same value, rendered from the
    stored JSON when the window is plain (see the module docstring)."""
    options = options or AssembleOptions()
    provider = parse_format(format)
    renderer = _PLAIN.get(provider)
    if renderer is not None and _plain_options(options) and window.rows:
        rendered = renderer(window.rows, profile.agent_id)
        if rendered is not None:
            return _assembly(window.rows, rendered, profile, slots, provider, options)
    return assemble(
        window.messages(), profile=profile, slots=slots, format=provider, options=options
    )


def _plain_options(options: AssembleOptions) -> bool:
    """Options under which a plain window's history is the window itself:
    nothing trimmed, folded or merged, estimated by the default counter."""
    return (
        options.token_budget is None
        and options.reminder_style is not ReminderStyle.INLINE
        and not options.merge_same_role
        and options.token_counter is approximate_tokens
    )


def _assembly(
    rows: Sequence[Row],
    rendered: Rendered,
    profile: AgentProfile,
    slots: ContextSlots,
    provider: ProviderFormat,
    options: AssembleOptions,
) -> Assembly:
    """The assembly of a plain window, `assemble`'s steps on its rendered
    rows: the frame, the special block's place, the prefix, the diagnostics."""
    messages, costs = rendered
    frame = Frame.of(profile, slots, options.token_counter)
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
        functools.partial(digest_rows, provider.value, system_prompt, rows[:at]),
        tokens=prefix_tokens + (0 if system_prompt is None else approximate_tokens(system_prompt)),
        message_count=at + (system_prompt is not None),
    )
    payload_messages: list[dict[str, Any]] = (
        [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
    )
    payload_messages += messages[:at]
    payload_messages += [render_message(m) for m in block]
    payload_messages += messages[at:]
    diagnostics = frame.diagnostics(
        format=provider,
        options=options,
        at=at,
        history_size=size,
        repairs=(),
        history_tokens=prefix_tokens + sum(costs[at:]),
        stable_prefix=prefix,
        cache_breakpoints=(),
        dropped_by_budget=None,
    )
    return Assembly(
        payload={"messages": payload_messages},
        diagnostics=diagnostics,
        messages_of=functools.partial(_neutral, frame, rows, at),
    )


def _neutral(frame: Frame, rows: Sequence[Row], at: int) -> tuple[Message, ...]:
    history = decode_window(rows)
    system = [frame.system] if frame.system is not None else []
    return (*system, *history[:at], *frame.block, *history[at:])


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


def _openai_chat(
    rows: Sequence[Row], agent_id: str
) -> tuple[list[dict[str, Any]], list[int]] | None:
    """OpenAI Chat's messages for the window's rows (`openai_chat.render` of
    the decoded window, message for message), and each message's token
    estimate (`estimate_messages_tokens`); None at the first row that is not
    plain: another agent's, content that is not a string, a result that
    does not follow its call's block, a block left unanswered, a call id
    used twice or longer than the format takes, a non-finite argument."""
    messages: list[dict[str, Any]] = []
    costs: list[int] = []
    append, cost = messages.append, costs.append
    seen: set[str] = set()  # every call id so far
    waiting: set[str] = set()  # the current block's calls not answered yet
    longest = OPENAI_CHAT.max_length or 0
    for row in rows:
        message = row[0]["message"]
        edit = row[1]
        content = message.get("content", "") if edit is None else edit["content"]
        if content.__class__ is not str or message.get("agent_id", MAIN_AGENT) != agent_id:
            return None
        tokens = MESSAGE_OVERHEAD + (len(content) + 3) // 4
        reasoning = message.get("reasoning")
        if reasoning:
            for block in reasoning:
                tokens += (len(block.get("text") or "") + 3) // 4
        role = message["role"]
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in waiting:  # an orphan, a second result, or out of its block
                return None
            waiting.discard(call_id)
            append({"role": "tool", "tool_call_id": call_id, "content": content})
        elif waiting:  # a block interrupted or left unanswered
            return None
        elif role == "user":
            append({"role": "user", "content": content})
        elif role == "assistant":
            text = content if content.strip() else ""
            calls = message.get("tool_calls")
            if not calls:
                append({"role": "assistant", "content": text})
            else:
                rendered_calls = []
                for call in calls:
                    call_id, name = call["id"], call["name"]
                    arguments = call.get("arguments", {})
                    if call_id in seen or not 0 < len(call_id) <= longest:
                        return None
                    if arguments and has_non_finite(arguments):
                        return None
                    seen.add(call_id)
                    waiting.add(call_id)
                    sent = arguments_json(arguments)
                    counted = sent if sent.isascii() else arguments_text(arguments)
                    tokens += (len(name) + 3) // 4 + (len(counted) + 3) // 4
                    rendered_calls.append(
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": sent},
                        }
                    )
                append({"role": "assistant", "content": text or None, "tool_calls": rendered_calls})
        else:  # a system message mid-window
            append({"role": role, "content": content})
        cost(tokens)
    if waiting:
        return None
    return messages, costs


# The formats with a plain renderer; the others always take `assemble`.
_PLAIN: dict[ProviderFormat, PlainRenderer] = {ProviderFormat.OPENAI_CHAT: _openai_chat}
