"""Which text becomes the system prompt, and which role definition goes into
the special block (docs/behaviours.md §2).

Main agent: the custom system prompt if set; else the role definition is
promoted to the system prompt *and* stays the first special user message
(the duplication is intended). Neither → no system prompt. A sub-agent must
have a role definition: without one, nothing is built.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.domain.context import AgentProfile
from store.domain.errors import ConfigurationError


@dataclass(frozen=True, kw_only=True)
class SystemPromptChoice:
    text: str | None
    source: str | None  # "custom" | "role_definition" | None
    role_definition: str | None  # what the special block renders first


def _present(text: str | None) -> str | None:
    return text if text is not None and text.strip() else None


def choose_system_prompt(profile: AgentProfile) -> SystemPromptChoice:
    custom = _present(profile.system_prompt)
    role = _present(profile.role_definition)
    if profile.is_sub_agent and role is None:
        raise ConfigurationError(
            f"sub-agent {profile.agent_id!r} has no role definition; "
            "set one before building a payload for it"
        )
    if custom is not None:
        return SystemPromptChoice(text=custom, source="custom", role_definition=role)
    if role is not None:
        return SystemPromptChoice(text=role, source="role_definition", role_definition=role)
    return SystemPromptChoice(text=None, source=None, role_definition=None)
