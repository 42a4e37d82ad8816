"""Hypothesis strategies for whole conversations, shared by the validator
property test (`test_properties`) and the SDK-types property test
(`test_sdk_types`).

Besides ordinary turns they make what broke payloads before (docs/assembler.md, "Validator"):
empty windows (no step, or only another agent's), image-only assistant
turns with reasoning, thinking blocks with signatures, Gemini thought
signatures, tool ids a provider refuses (`functions.ls:0`, spaces, pipes,
non-ASCII, more than 40 or 64 characters), ids reused by a later call,
non-finite numbers in arguments (built under the `STORED` context, as a log
written under other limits would give them), blank and non-strict-JSON
tool results, and retried results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from store.assembler import AssembleOptions, ReminderStyle
from store.assembler.options import ChatReasoning
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.inputs import STORED
from store.domain.messages import ImagePart, Message, MessageKind, Reasoning, TextPart, ToolCall

# Drawn from lists rather than regexes: generating is most of these tests' time.
WORDS = [
    "a", "ls", "cat", "done", "hello", "read it", "fix the bug", "then run tests",
    "b c", "yes", "no way", "what now", "plan", "x y z", "ok then", "tool",
]  # fmt: skip
words = st.sampled_from(WORDS)
padded = st.builds(str.__add__, words, st.sampled_from(["", " ", "\n"]))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | words
    | st.floats(allow_nan=True, allow_infinity=True)
)
argument_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(
    st.sampled_from(["path", "n", "q", "opts", "x"]), argument_values, max_size=3
)
images = st.sampled_from(
    [ImagePart(url="https://example.com/a.png"), ImagePart(data="aGk=", media_type="image/png")]
)
reasoning = st.lists(
    st.sampled_from(
        [
            Reasoning(provider="anthropic", text="think", signature="sig"),
            Reasoning(provider="anthropic", data="opaque", redacted=True),
            Reasoning(provider="openai", item_id="rs_1", text="summary", data="enc"),
            # Gemini sends thought signatures as base64 (its SDK refuses anything else).
            Reasoning(provider="gemini", signature="Z3NpZw=="),
            # An OpenAI-compatible Chat endpoint's `reasoning_content`.
            Reasoning(provider="openai-chat", text="chat thought"),
        ]
    ),
    max_size=2,
    unique=True,
)
# Ids every provider takes, and ids some provider refuses.
ID_FORMS = [
    "call{n}",
    "call{n}",
    "call{n}",
    "functions.{name}:{n}",  # Kimi-style: refused by Anthropic
    "toolu_{n}",
    "call {n}|é",  # a space, a pipe, non-ASCII
    "functions_{name}_{n}",  # what a naive sanitiser would turn the Kimi id into
    "call_{n}_" + "x" * 36,  # over OpenAI Chat's 40
    "call_{n}_" + "y" * 60,  # over OpenAI Responses' 64
]
RESULT_TEXTS = [
    "",
    "done",
    '{"ok": true}',
    "[1, 2]",
    " ",
    "\n",
    '{"x": NaN}',
    '{"y": 1e999}',
    # Long enough to be clipped by `option_values`' limits.
    "line of output\n" * 40,
]


# A result: text, or (images from tools) text and images.
result_contents = st.sampled_from(RESULT_TEXTS) | st.builds(
    lambda text, shots: (TextPart(text=text), *shots),
    st.sampled_from(RESULT_TEXTS),
    st.lists(images, min_size=1, max_size=2),
)

NAN, INF = float("nan"), float("inf")
# Argument objects of every shape that matters to a payload, drawn in one step
# (cheap: for tests that spend their time on assembling, not on arguments).
ARGUMENT_SAMPLES: list[dict[str, Any]] = [
    {},
    {"path": "."},
    {"n": 3, "flag": True, "none": None},
    {"x": 0.1, "y": -0.0, "big": 1e300, "tiny": 5e-324},
    {"x": NAN},
    {"x": INF, "y": -INF},
    {"nested": {"list": [1, "two", {"three": NAN}], "empty": {}}},
    {"list": [INF, [NAN, [-INF]]]},
    {"text": '<tag> & "quotes" é \n line'},
    {"deep": {"a": {"b": {"c": [1, 2.5, "x"]}}}},
]
argument_samples = st.sampled_from(ARGUMENT_SAMPLES)


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> ToolCall:
    # Under STORED, as a log written under other limits is read back: the
    # arguments may hold NaN or ±Infinity, which new input may not.
    return ToolCall.model_validate(
        {"id": call_id, "name": name, "arguments": arguments}, context=STORED
    )


@st.composite
def conversations(
    draw: st.DrawFn, arguments: st.SearchStrategy[dict[str, Any]] = arguments
) -> tuple[list[Message], str]:
    """A window of 0-12 steps for `main` or a sub-agent, with some of the
    other agent's messages; `arguments` draws each call's arguments."""
    agent = draw(st.sampled_from(["main", "sub"]))
    other = "sub" if agent == "main" else "main"
    messages: list[Message] = []
    used_ids: list[str] = []
    next_id = 0
    for _ in range(draw(st.integers(0, 12))):
        step = draw(
            st.sampled_from(
                [
                    "user",
                    "user",
                    "assistant",
                    "round",
                    "round",
                    "reminder",
                    "summary",
                    "orphan",
                    "other",
                    "image_only",
                ]
            )
        )
        if step == "user":
            if draw(st.booleans()):
                content: Any = draw(padded)
            else:
                parts = [TextPart(text=draw(words)), draw(images), TextPart(text=" ")]
                content = tuple(parts[: draw(st.integers(1, 3))])
            kind = draw(st.sampled_from([MessageKind.INPUT, MessageKind.SUMMARY]))
            messages.append(Message(role="user", content=content, kind=kind, agent_id=agent))
        elif step == "assistant":
            messages.append(
                Message(
                    role="assistant",
                    content=draw(padded),
                    reasoning=tuple(draw(reasoning)),
                    agent_id=agent,
                )
            )
        elif step == "image_only":
            messages.append(
                Message(
                    role="assistant",
                    content=(draw(images),),
                    reasoning=tuple(draw(reasoning)),
                    agent_id=agent,
                )
            )
        elif step == "round":
            calls: list[ToolCall] = []
            for _ in range(draw(st.integers(1, 3))):
                name = draw(st.sampled_from(["ls", "cat"]))
                taken = {call.id for call in calls}
                reusable = [i for i in used_ids if i not in taken]
                if reusable and draw(st.integers(0, 5)) == 0:  # an id an earlier call used
                    call_id = draw(st.sampled_from(reusable))
                else:
                    call_id = draw(st.sampled_from(ID_FORMS)).format(n=next_id, name=name)
                    next_id += 1
                calls.append(tool_call(call_id, name, draw(arguments)))
                used_ids.append(call_id)
            text = draw(st.sampled_from(["", "let me check"]))
            messages.append(
                Message(
                    role="assistant",
                    content=text,
                    tool_calls=tuple(calls),
                    reasoning=tuple(draw(reasoning)),
                    agent_id=agent,
                )
            )
            answered = draw(st.permutations(calls))[: draw(st.integers(0, len(calls)))]
            for call in answered:
                if draw(st.integers(0, 4)) == 0:
                    messages.append(
                        Message(
                            role="system",
                            kind=MessageKind.REMINDER,
                            content=draw(words),
                            agent_id=agent,
                        )
                    )
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        content=draw(result_contents),
                        is_error=draw(st.booleans()),
                        agent_id=agent,
                    )
                )
                if draw(st.integers(0, 9)) == 0:  # a retried tool reported twice
                    messages.append(
                        Message(role="tool", tool_call_id=call.id, content="again", agent_id=agent)
                    )
        elif step == "reminder":
            messages.append(
                Message(
                    role="system", kind=MessageKind.REMINDER, content=draw(words), agent_id=agent
                )
            )
        elif step == "summary":
            messages.append(
                Message(
                    role="system", kind=MessageKind.SUMMARY, content=draw(words), agent_id=agent
                )
            )
        elif step == "orphan":
            messages.append(
                Message(role="tool", tool_call_id=f"lost{next_id}", content="late", agent_id=agent)
            )
            next_id += 1
        else:
            messages.append(Message(role="user", content=draw(words), agent_id=other))
    return messages, agent


profiles_for = {
    "main": st.builds(
        AgentProfile,
        agent_id=st.just("main"),
        system_prompt=st.none() | words,
        role_definition=st.none() | words,
    ),
    "sub": st.builds(
        AgentProfile,
        agent_id=st.just("sub"),
        is_sub_agent=st.just(True),
        system_prompt=st.none() | words,
        role_definition=words,
    ),
}
slot_values = st.builds(
    ContextSlots,
    todo=st.lists(
        st.builds(
            TodoItem,
            id=st.sampled_from(["1", "2", "10", "42"]),
            content=words,
            status=st.sampled_from(["pending", "in_progress", "completed"]),
        ),
        max_size=2,
    ).map(tuple),
    useful_info=st.none() | words,
    folder_notes=st.none() | words,
    custom=st.dictionaries(st.sampled_from(["alpha", "beta"]), words, max_size=2),
)
option_values = st.builds(
    AssembleOptions,
    chat_reasoning=st.sampled_from(list(ChatReasoning)),
    max_tool_result_chars=st.none() | st.integers(200, 400),
    max_tool_result_chars_by_tool=st.just({}) | st.just({"cat": 200}),
    n=st.none() | st.integers(1, 6),
    merge_same_role=st.booleans(),
    reminder_style=st.sampled_from(list(ReminderStyle)),
    token_budget=st.none() | st.integers(20, 400),
)


@dataclass(frozen=True)
class AssemblyInput:
    """One drawn input of the assembler: a window for `agent`, that agent's
    profile and slots, and options (their policy is overridden per check)."""

    messages: list[Message]
    agent: str
    profile: AgentProfile
    slots: ContextSlots
    options: AssembleOptions


@st.composite
def assembly_inputs(
    draw: st.DrawFn, arguments: st.SearchStrategy[dict[str, Any]] = arguments
) -> AssemblyInput:
    messages, agent = draw(conversations(arguments))
    return AssemblyInput(
        messages, agent, draw(profiles_for[agent]), draw(slot_values), draw(option_values)
    )
