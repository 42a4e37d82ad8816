"""Short constructors for test conversations, in the notation of behaviours.md:
S system prompt (a profile field), U user, A assistant, A[1,2] assistant with
calls 1 and 2, T1 the result of call 1, R a reminder."""

from __future__ import annotations

from typing import Any

from store.assembler import AssembleOptions, Assembly, assemble
from store.domain.context import AgentProfile, ContextSlots, TodoItem
from store.domain.messages import Message, MessageKind, ToolCall

MAIN = AgentProfile(system_prompt="You are helpful.")
NO_SYSTEM = AgentProfile()
ONE_SLOT = ContextSlots(useful_info="facts")
FOUR_SLOTS = ContextSlots(
    todo=(TodoItem(id="1", content="write tests", status="pending"),),
    useful_info="facts",
    folder_notes="notes",
)


def U(text: str = "hello", **fields: Any) -> Message:
    return Message(role="user", content=text, **fields)


def A(text: str = "ok", *calls: int | str, **fields: Any) -> Message:
    tool_calls = tuple(ToolCall(id=f"c{c}", name=f"tool{c}", arguments={"n": c}) for c in calls)
    return Message(role="assistant", content=text, tool_calls=tool_calls, **fields)


def AC(*calls: int | str, **fields: Any) -> Message:
    """An assistant message with calls and no text."""
    return A("", *calls, **fields)


def T(call: int | str, text: str | None = None, **fields: Any) -> Message:
    return Message(
        role="tool",
        tool_call_id=f"c{call}",
        content=f"result {call}" if text is None else text,
        **fields,
    )


def R(text: str = "todo changed", **fields: Any) -> Message:
    return Message(role="system", kind=MessageKind.REMINDER, content=text, **fields)


def build(
    messages: list[Message],
    *,
    format: str = "openai-chat",
    profile: AgentProfile = MAIN,
    slots: ContextSlots = ONE_SLOT,
    **options: Any,
) -> Assembly:
    return assemble(
        messages,
        profile=profile,
        slots=slots,
        format=format,
        options=AssembleOptions(**options),
    )


def shape(assembly: Assembly) -> list[str]:
    """The neutral list in behaviours.md notation: S, U, A[1,2], T1, R, SP."""
    out: list[str] = []
    for index, message in enumerate(assembly.messages):
        if "special_slot" in message.metadata:
            if not out or out[-1] != "SP":
                out.append("SP")
        elif message.role == "system":
            out.append("S" if index == 0 and message.kind is not MessageKind.REMINDER else "R")
        elif message.role == "user":
            out.append("U")
        elif message.role == "assistant":
            ids = ",".join(c.id.removeprefix("c") for c in message.tool_calls)
            out.append(f"A[{ids}]" if ids else "A")
        else:
            out.append(f"T{(message.tool_call_id or '').removeprefix('c')}")
    return out
