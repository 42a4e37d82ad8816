"""Agent profiles and context slots: per-agent state the assembler renders.

These are state, not messages. The assembler renders them fresh into the
"special user" block at every build, so a TODO that changed a moment ago is
what the model sees next (stale content was the source systems' last
complaint: docs/behaviours.md §1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from store.domain.inputs import AgentId, BoundedText, Identifier
from store.domain.messages import MAIN_AGENT

TodoStatus = Literal["pending", "in_progress", "completed"]

# The built-in slots, in the order the special block renders them. Any other
# slot name is a custom slot, rendered after these, sorted by name.
ROLE_DEFINITION = "role_definition"
TODO = "todo"
USEFUL_INFO = "useful_info"
FOLDER_NOTES = "folder_notes"
BUILTIN_SLOTS: tuple[str, ...] = (ROLE_DEFINITION, TODO, USEFUL_INFO, FOLDER_NOTES)


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TodoItem(_Value):
    id: Identifier
    content: BoundedText
    status: TodoStatus = "pending"


class AgentProfile(_Value):
    """How one agent of a conversation is configured.

    `system_prompt` is the agent's custom system prompt; `role_definition`
    is `mainAgentRole` / `subAgentRole` in the source systems
    (docs/behaviours.md §2). A sub-agent must have a role definition before a
    payload is built for it.
    """

    agent_id: AgentId = MAIN_AGENT
    is_sub_agent: bool = False
    system_prompt: BoundedText | None = None
    role_definition: BoundedText | None = None


class ContextSlots(_Value):
    """The latest value of each context slot of one agent (role definition
    lives on the `AgentProfile`)."""

    todo: tuple[TodoItem, ...] = ()
    useful_info: str | None = None
    folder_notes: str | None = None
    custom: dict[str, str] = Field(default_factory=dict)


def slots_from_values(values: Mapping[str, Any]) -> ContextSlots:
    """ContextSlots from stored slot values (name → text, or todo items)."""
    return ContextSlots(
        todo=tuple(TodoItem.model_validate(i) for i in values.get(TODO) or ()),
        useful_info=values.get(USEFUL_INFO),
        folder_notes=values.get(FOLDER_NOTES),
        custom={k: str(v) for k, v in sorted(values.items()) if k not in BUILTIN_SLOTS},
    )


def default_profile(agent_id: str) -> AgentProfile:
    """The profile of an agent nobody configured: any agent but `main` is a sub-agent."""
    return AgentProfile(agent_id=agent_id, is_sub_agent=agent_id != MAIN_AGENT)
