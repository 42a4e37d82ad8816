"""Reads: the visible window, paged history, recent messages by role, role
ranges, counts, tool blocks."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS
from api.routes.parameters import cursor_query, limit_query
from api.routing import JSONRoute, read_route
from api.schemas import (
    AgentQuery,
    BatchQuery,
    ConversationIdPath,
    CountQuery,
    OrdinalQuery,
)
from store.domain.inputs import MAX_BIGINT
from store.domain.listing import MAX_CURSOR_CHARS, MessagePage
from store.domain.messages import MessageKind, Role, StoredMessage
from store.repository import MAX_READ_LIMIT, Scope, ToolBlock

router = APIRouter(prefix="/conversations", tags=["reads"], route_class=JSONRoute)

NEXT_CURSOR_HEADER = "X-Next-Cursor"

ScopeQuery = Annotated[
    Scope, Query(description="visible: the current batch's window; history: every message")
]


@router.get(
    "/{conversation_id}/window",
    summary="The visible window, a page at a time",
    operation_id="readWindow",
    responses={
        **CONVERSATION_ERRORS,
        200: {
            "description": "The page's messages, in window order",
            "headers": {
                NEXT_CURSOR_HEADER: {
                    "description": "Present when more follow: send it back as `cursor`.",
                    "schema": {"type": "string"},
                }
            },
        },
    },
)
async def read_window(
    conversation_id: ConversationIdPath,
    repository: RepositoryDep,
    response: Response,
    batch: BatchQuery = None,
    agent_id: AgentQuery = None,
    limit: Annotated[
        int, limit_query(f"At most this many (1..{MAX_READ_LIMIT}).", maximum=MAX_READ_LIMIT)
    ] = MAX_READ_LIMIT,
    cursor: Annotated[
        str | None,
        cursor_query(
            f"The previous page's `{NEXT_CURSOR_HEADER}` header.", max_length=MAX_CURSOR_CHARS
        ),
    ] = None,
) -> list[StoredMessage]:
    """What a batch shows: retained ∪ summary ∪ messages from its boundary on,
    in window order. A window longer than `limit` comes in pages: while the
    response has an `X-Next-Cursor` header, send it back as `cursor`."""
    page = await repository.read_window(
        conversation_id,
        batch=batch,
        agent_id=agent_id,
        cursor=cursor,
        limit=limit,
    )
    if page.next_cursor is not None:
        response.headers[NEXT_CURSOR_HEADER] = page.next_cursor
    return list(page.items)


@router.get(
    "/{conversation_id}/messages",
    **read_route("A page of the conversation's messages, by seq", "listMessages"),
)
async def list_messages(
    conversation_id: ConversationIdPath,
    repository: RepositoryDep,
    after_seq: Annotated[
        int | None,
        Query(ge=0, le=MAX_BIGINT, description="Only messages after this seq (next asc page)."),
    ] = None,
    before_seq: Annotated[
        int | None,
        Query(ge=1, le=MAX_BIGINT, description="Only messages before this seq (next desc page)."),
    ] = None,
    limit: Annotated[
        int, limit_query(f"Page size, 1..{MAX_READ_LIMIT}.", maximum=MAX_READ_LIMIT)
    ] = 100,
    order: Annotated[
        Literal["asc", "desc"],
        Query(description="asc: oldest first; desc: newest first (desc&limit=N: the last N)."),
    ] = "asc",
    role: Annotated[Role | None, Query(description="Only this role's messages.")] = None,
    agent_id: AgentQuery = None,
    kind: Annotated[MessageKind | None, Query(description="Only this kind of message.")] = None,
    scope: Annotated[
        Scope,
        Query(description="history (default): every message; visible: the current window's"),
    ] = "history",
) -> MessagePage:
    """Every role, a keyset page by seq; the last N is `order=desc&limit=N`,
    read from the end whatever the length of the history. Pass
    `next_after_seq` (asc) or `next_before_seq` (desc) back for the next page."""
    return await repository.page_messages(
        conversation_id,
        after_seq=after_seq,
        before_seq=before_seq,
        limit=limit,
        order=order,
        role=role,
        agent_id=agent_id,
        kind=None if kind is None else kind.value,
        scope=scope,
    )


@router.get(
    "/{conversation_id}/messages/recent",
    **read_route("The last n messages of a role", "recentByRole"),
)
async def recent_by_role(
    conversation_id: ConversationIdPath,
    repository: RepositoryDep,
    role: Annotated[Role, Query(description="The role.")],
    n: CountQuery = 10,
    scope: ScopeQuery = "visible",
    agent_id: AgentQuery = None,
) -> list[StoredMessage]:
    return await repository.recent_by_role(conversation_id, role, n, scope=scope, agent_id=agent_id)


@router.get(
    "/{conversation_id}/roles/{role}",
    **read_route("A range of a role's messages", "roleRange"),
)
async def role_range(
    conversation_id: ConversationIdPath,
    role: Annotated[Role, Path(description="The role.")],
    repository: RepositoryDep,
    first: Annotated[OrdinalQuery, Query(description="1-based ordinal of the role")],
    last: Annotated[OrdinalQuery, Query(description="inclusive")],
) -> list[StoredMessage]:
    """The `first`-th to the `last`-th message of `role` in the whole history."""
    return await repository.role_range(conversation_id, role, first, last)


@router.get(
    "/{conversation_id}/counts",
    **read_route("How many messages of each role", "countByRole"),
)
async def count_by_role(
    conversation_id: ConversationIdPath, repository: RepositoryDep, scope: ScopeQuery = "visible"
) -> dict[Role, int]:
    return await repository.count_by_role(conversation_id, scope=scope)


@router.get(
    "/{conversation_id}/tool-blocks",
    **read_route("Tool calls and their results", "listToolBlocks"),
)
async def tool_blocks(
    conversation_id: ConversationIdPath,
    repository: RepositoryDep,
    pending_only: Annotated[
        bool, Query(description="Only calls still waiting for a result.")
    ] = False,
    agent_id: AgentQuery = None,
) -> list[ToolBlock]:
    return await repository.tool_blocks(
        conversation_id, pending_only=pending_only, agent_id=agent_id
    )
