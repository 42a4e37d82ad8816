"""Reads: the visible window, recent messages by role, role ranges, counts, tool blocks."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS
from api.routing import JSONRoute
from api.schemas import AgentQuery, BatchQuery, CountQuery, OrdinalQuery
from store.messages import Role, StoredMessage
from store.repository import Scope, ToolBlock

router = APIRouter(
    prefix="/conversations", tags=["reads"], responses=CONVERSATION_ERRORS, route_class=JSONRoute
)

ScopeQuery = Annotated[
    Scope, Query(description="visible: the current batch's window; history: every message")
]


@router.get("/{conversation_id}/window", summary="The visible window")
async def visible_window(
    conversation_id: uuid.UUID,
    repository: RepositoryDep,
    batch: BatchQuery = None,
    agent_id: AgentQuery = None,
) -> list[StoredMessage]:
    """What a batch shows: retained ∪ summary ∪ messages from its boundary on."""
    return await repository.visible_window(conversation_id, batch=batch, agent_id=agent_id)


@router.get("/{conversation_id}/messages/recent", summary="The last n messages of a role")
async def recent_by_role(
    conversation_id: uuid.UUID,
    repository: RepositoryDep,
    role: Role,
    n: CountQuery = 10,
    scope: ScopeQuery = "visible",
    agent_id: AgentQuery = None,
) -> list[StoredMessage]:
    return await repository.recent_by_role(conversation_id, role, n, scope=scope, agent_id=agent_id)


@router.get("/{conversation_id}/roles/{role}", summary="A range of a role's messages")
async def role_range(
    conversation_id: uuid.UUID,
    role: Role,
    repository: RepositoryDep,
    first: Annotated[OrdinalQuery, Query(description="1-based ordinal of the role")],
    last: Annotated[OrdinalQuery, Query(description="inclusive")],
) -> list[StoredMessage]:
    """The `first`-th to the `last`-th message of `role` in the whole history."""
    return await repository.role_range(conversation_id, role, first, last)


@router.get("/{conversation_id}/counts", summary="How many messages of each role")
async def count_by_role(
    conversation_id: uuid.UUID, repository: RepositoryDep, scope: ScopeQuery = "visible"
) -> dict[Role, int]:
    return await repository.count_by_role(conversation_id, scope=scope)


@router.get("/{conversation_id}/tool-blocks", summary="Tool calls and their results")
async def tool_blocks(
    conversation_id: uuid.UUID,
    repository: RepositoryDep,
    pending_only: bool = False,
    agent_id: AgentQuery = None,
) -> list[ToolBlock]:
    return await repository.tool_blocks(
        conversation_id, pending_only=pending_only, agent_id=agent_id
    )
