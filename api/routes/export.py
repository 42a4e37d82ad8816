"""Export: one conversation as JSON Lines, streamed a page at a time (store.repository.export)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from api.deps import KeyWatchDep, RepositoryDep
from api.errors import CONVERSATION_ERRORS
from api.revocation import json_lines_ended
from api.routing import JSONRoute
from api.schemas import ConversationIdPath
from store.repository.export import export_pages

router = APIRouter(
    prefix="/conversations", tags=["export"], responses=CONVERSATION_ERRORS, route_class=JSONRoute
)

NDJSON = "application/x-ndjson"

EventsQuery = Annotated[
    bool,
    Query(
        description="false: one typed message per line (user, assistant, tool, system,"
        " reminder, summary); true: the raw event log, one event per line."
    ),
]


@router.get(
    "/{conversation_id}/export",
    operation_id="exportConversation",
    summary="Export a conversation as JSON Lines",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {NDJSON: {"schema": {"type": "string"}}},
            "description": "One JSON object per line, in seq (or, with events, version) order.",
        }
    },
)
async def export_conversation(
    conversation_id: ConversationIdPath,
    repository: RepositoryDep,
    watch: KeyWatchDep,
    events: EventsQuery = False,
) -> StreamingResponse:
    """Every message of the conversation, each line typed so user input and
    system-generated text never mix; read and sent 1,000 rows at a time.
    When the key is revoked or expires during the export, it ends with a
    line `{"type": "error", "problem": {…}}` (`Unauthorized`)."""
    pages = export_pages(repository, conversation_id, events=events, name=conversation_id)
    # The first page is read here: a missing conversation is a 404, not a
    # stream that breaks off.
    first = await anext(pages, None)

    async def body() -> AsyncIterator[bytes]:
        if first is None:
            return
        yield first
        async for chunk in pages:
            yield chunk

    return StreamingResponse(watch.guard(body(), json_lines_ended()), media_type=NDJSON)
