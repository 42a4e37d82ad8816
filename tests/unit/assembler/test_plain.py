"""Property: a payload built from stored rows (`assemble_stored`) is the
value `assemble` builds from the decoded messages: payload, diagnostics
(the fingerprint included) and neutral messages, for every format, policy
and option; and a plain window does take the plain path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.assembler import (
    AssembleOptions,
    PlacementPolicy,
    ProviderFormat,
    assemble,
    assemble_stored,
)
from store.assembler.plain import _PLAIN, ANY_REASONING, _render
from store.domain.codec import StoredWindow, encode_message
from store.domain.context import AgentProfile, ContextSlots
from store.domain.messages import Message, MessageKind, Reasoning, ToolCall
from store.domain.tokens import estimate_message_tokens, estimate_messages_tokens
from tests.unit.assembler.strategies import (
    conversations,
    option_values,
    profiles_for,
    slot_values,
    words,
)

# Reasoning of each: OpenAI Chat takes the general path with any (its diagnostics
# count it), and the other two replay their own.
PROVIDERS = ["anthropic", "openai", "gemini"]
# Options under which a plain window keeps the plain path.
plain_options = st.builds(
    AssembleOptions,
    policy=st.sampled_from(list(PlacementPolicy)),
    n=st.none() | st.integers(1, 6),
    repair=st.booleans(),
    cache_breakpoints=st.booleans(),
    max_tool_result_chars=st.none() | st.integers(200, 400),
)


def stored_rows(messages: list[Message], edits: list[str | None]) -> list[tuple[Any, Any]]:
    """The rows a storage reads for `messages`: each one's event JSON (as
    the log keeps it, through JSON text) and, where `edits` says, an edit's."""
    rows = []
    for message, edit in zip(messages, edits, strict=True):
        body = json.loads(json.dumps({"seq": 1, "message": encode_message(message)}))
        rows.append((body, None if edit is None else {"content": edit, "token_estimate": 9}))
    return rows


@st.composite
def plain_windows(draw: st.DrawFn) -> tuple[list[Message], str]:
    """Windows with nothing to repair: text messages, each call answered
    right after its block, ids unique and short."""
    agent = draw(st.sampled_from(["main", "sub"]))
    messages: list[Message] = []
    for n in range(draw(st.integers(1, 10))):
        step = draw(st.sampled_from(["user", "assistant", "round", "system"]))
        reasoning = tuple(
            draw(
                st.lists(
                    st.builds(Reasoning, provider=st.sampled_from(PROVIDERS), text=words),
                    max_size=1,
                )
            )
        )
        if step == "user":
            messages.append(Message(role="user", content=draw(words), agent_id=agent))
        elif step == "assistant":
            text = draw(st.sampled_from(["done", "  done\n", "é ünïcode"]))
            messages.append(
                Message(role="assistant", content=text, reasoning=reasoning, agent_id=agent)
            )
        elif step == "system":
            kind = draw(st.sampled_from([MessageKind.REMINDER, MessageKind.SUMMARY]))
            messages.append(Message(role="system", content=draw(words), kind=kind, agent_id=agent))
        else:
            calls = [
                ToolCall(id=f"call_{n}_{k}", name="read", arguments=draw(st.sampled_from(ARGS)))
                for k in range(draw(st.integers(1, 3)))
            ]
            messages.append(
                Message(
                    role="assistant",
                    content=draw(st.sampled_from(["", " ", "checking"])),
                    tool_calls=tuple(calls),
                    reasoning=reasoning,
                    agent_id=agent,
                )
            )
            for call in draw(st.permutations(calls)):
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        content=draw(words),
                        is_error=draw(st.booleans()),
                        agent_id=agent,
                    )
                )
    return messages, agent


ARGS: list[dict[str, Any]] = [{}, {"path": "."}, {"q": "é", "n": [1, 2.5]}, {"b": {"a": None}}]


def _same(
    rows: list[tuple[Any, Any]],
    profile: AgentProfile,
    slots: ContextSlots,
    options: AssembleOptions,
) -> None:
    window = StoredWindow(rows)
    for format in ProviderFormat:
        try:
            expected = assemble(
                window.messages(), profile=profile, slots=slots, format=format, options=options
            )
        except Exception as error:  # the same error, from the same input
            with pytest.raises(type(error)):
                assemble_stored(
                    window, profile=profile, slots=slots, format=format, options=options
                )
            continue
        built = assemble_stored(
            window, profile=profile, slots=slots, format=format, options=options
        )
        assert built.payload == expected.payload, format
        assert built.diagnostics == expected.diagnostics, format
        assert built.diagnostics.stable_prefix.fingerprint == (
            expected.diagnostics.stable_prefix.fingerprint
        )
        assert built.messages == expected.messages, format


@pytest.mark.slow
@settings(max_examples=300, database=None)
@given(
    data=st.data(),
    window=plain_windows(),
    slots=slot_values,
    options=plain_options,
)
def test_a_plain_window_takes_the_plain_path_and_builds_what_assemble_builds(
    data: st.DataObject,
    window: tuple[list[Message], str],
    slots: ContextSlots,
    options: AssembleOptions,
) -> None:
    messages, agent = window
    size = len(messages)
    edited = data.draw(st.lists(st.none() | st.none() | words, min_size=size, max_size=size))
    rows = stored_rows(messages, edited)
    replayed = {r.provider for m in messages for r in m.reasoning}
    for make in _PLAIN.values():
        target = make()
        # Reasoning a format replays takes the general path (its own rules);
        # for OpenAI Chat, any reasoning does.
        plain = target.replays not in replayed and not (
            target.replays == ANY_REASONING and replayed
        )
        assert (_render(rows, agent, target) is not None) == plain, target
    _same(rows, data.draw(profiles_for[agent]), slots, options)


@settings(max_examples=100, database=None)
@given(data=st.data(), window=plain_windows())
def test_the_plain_paths_token_estimates_are_the_domains(
    data: st.DataObject, window: tuple[list[Message], str]
) -> None:
    # The fast path costs each message off its stored JSON; the estimate is
    # `store.domain.tokens`' rule, whichever path a build takes.
    messages, agent = window
    size = len(messages)
    edited = data.draw(st.lists(st.none() | words, min_size=size, max_size=size))
    rows = stored_rows(messages, edited)
    expected = estimate_messages_tokens(StoredWindow(rows).messages())
    assert expected == [estimate_message_tokens(m) for m in StoredWindow(rows).messages()]
    for make in _PLAIN.values():
        costs = _render(rows, agent, make())
        if costs is not None:
            assert costs == expected


@pytest.mark.slow
@settings(max_examples=150, database=None)
@given(
    data=st.data(),
    conversation=conversations(),
    slots=slot_values,
    options=st.one_of(plain_options, option_values),
)
def test_any_window_builds_from_its_rows_what_assemble_builds(
    data: st.DataObject,
    conversation: tuple[list[Message], str],
    slots: ContextSlots,
    options: AssembleOptions,
) -> None:
    messages, agent = conversation
    rows = stored_rows(messages, [None] * len(messages))
    _same(rows, data.draw(profiles_for[agent]), slots, options)


def test_a_window_not_plain_goes_the_general_way() -> None:
    """One row that needs a repair (a result with no call) is enough."""
    rows = stored_rows(
        [
            Message(role="user", content="hi"),
            Message(role="tool", tool_call_id="lost", content="late"),
        ],
        [None, None],
    )
    assert _render(rows, "main", _PLAIN[ProviderFormat.OPENAI_CHAT]()) is None
    built = assemble_stored(
        StoredWindow(rows), profile=AgentProfile(), slots=ContextSlots(), format="openai-chat"
    )
    assert [r.kind.value for r in built.diagnostics.repairs] == ["dropped_orphan_tool_result"]
