"""Agents of a conversation: profile (system prompt, role definition) and context slots."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import RepositoryDep
from api.routing import JSONRoute, read_route, write_route
from api.schemas import (
    Agent,
    AgentConfigure,
    AgentIdPath,
    ConversationIdPath,
    SlotPath,
    SlotUpdate,
    Written,
    expected_version,
)
from store.domain.context import AgentProfile
from store.domain.messages import MAIN_AGENT

router = APIRouter(prefix="/conversations", tags=["agents"], route_class=JSONRoute)


@router.put(
    "/{conversation_id}/agents/{agent_id}",
    **write_route("Configure an agent's profile", "configureAgent"),
)
async def configure_agent(
    conversation_id: ConversationIdPath,
    agent_id: AgentIdPath,
    body: AgentConfigure,
    repository: RepositoryDep,
) -> Written:
    """Set the agent's custom system prompt and role definition (replaces the profile)."""
    profile = AgentProfile(
        agent_id=agent_id,
        is_sub_agent=body.is_sub_agent if body.is_sub_agent is not None else agent_id != MAIN_AGENT,
        system_prompt=body.system_prompt,
        role_definition=body.role_definition,
    )
    version = await repository.configure_agent(
        conversation_id, profile, expected_version=expected_version(body.expected_version)
    )
    return Written(conversation_id=conversation_id, version=version)


@router.put(
    "/{conversation_id}/agents/{agent_id}/slots/{slot}",
    **write_route("Set a context slot", "updateSlot"),
)
async def update_slot(
    conversation_id: ConversationIdPath,
    agent_id: AgentIdPath,
    slot: SlotPath,
    body: SlotUpdate,
    repository: RepositoryDep,
) -> Written:
    """`todo` takes a list of items; `useful_info`, `folder_notes` and custom slots
    take text; null clears the slot."""
    version = await repository.update_slot(
        conversation_id,
        slot,
        body.value,
        agent_id=agent_id,
        expected_version=expected_version(body.expected_version),
    )
    return Written(conversation_id=conversation_id, version=version)


@router.get(
    "/{conversation_id}/agents/{agent_id}",
    **read_route("Read an agent's profile and slots", "getAgent"),
)
async def get_agent(
    conversation_id: ConversationIdPath, agent_id: AgentIdPath, repository: RepositoryDep
) -> Agent:
    profile = await repository.agent_profile(conversation_id, agent_id)
    slots = await repository.context_slots(conversation_id, agent_id)
    return Agent(profile=profile, slots=slots)
