"""Search across the tenant's conversations: `GET /messages/search`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.deps import RepositoryDep
from api.errors import CONVERSATION_ERRORS
from api.routes.parameters import cursor_query, limit_query, name_filter
from api.routing import JSONRoute
from store.domain.errors import InvalidOperation
from store.domain.inputs import MAX_AGENT_ID_CHARS, MAX_ID_CHARS, MAX_INTEGER
from store.domain.messages import MessageKind, Role
from store.domain.search import (
    DEFAULT_SEARCH_LIMIT,
    MAX_CURSOR_CHARS,
    MAX_SEARCH_LIMIT,
    MAX_SEARCH_METADATA_CHARS,
    MAX_SEARCH_QUERY_CHARS,
    MIN_SUBSTRING_CHARS,
    SearchMode,
    SearchPage,
    search_query,
)

# A search names no conversation it could fail to find: no 404, no 410.
SEARCH_ERRORS = {k: v for k, v in CONVERSATION_ERRORS.items() if k not in (404, 410)}

router = APIRouter(
    prefix="/messages", tags=["search"], responses=SEARCH_ERRORS, route_class=JSONRoute
)


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        raise InvalidOperation("invalid search: metadata: is not JSON") from None
    if not isinstance(value, dict):
        raise InvalidOperation("invalid search: metadata: must be a JSON object")
    return value


@router.get(
    "/search",
    summary="Search the tenant's messages",
    operation_id="searchMessages",
    response_description="A page of hits, newest first, and the next page's cursor",
)
async def search_messages(
    repository: RepositoryDep,
    q: Annotated[
        str,
        Query(
            min_length=1,
            max_length=MAX_SEARCH_QUERY_CHARS,
            description="What to find (1–500 characters). mode=text: words, any language"
            " (Chinese, Japanese and Korean words of any length, without spaces),"
            ' with web-search syntax (`"exact phrase"`, `a OR b`, `-excluded`);'
            " mode=substring: these characters anywhere, case-insensitively"
            f" (at least {MIN_SUBSTRING_CHARS}, or CJK characters only).",
            examples=["deploy failed", "北京见面"],
        ),
    ],
    mode: Annotated[
        SearchMode,
        Query(
            description="text: whole words (full-text search, no stemming; CJK as"
            " character bigrams); substring: the characters as typed, e.g. parts of"
            " identifiers.",
            examples=["text"],
        ),
    ] = "text",
    role: Annotated[Role | None, Query(description="Only this role's messages.")] = None,
    agent_id: Annotated[
        str | None,
        name_filter(
            "Only this agent's messages (`main` or a sub-agent's id).",
            max_length=MAX_AGENT_ID_CHARS,
            example="main",
        ),
    ] = None,
    kind: Annotated[MessageKind | None, Query(description="Only this kind of message.")] = None,
    tool_name: Annotated[
        str | None,
        name_filter(
            "Only tool calls of this tool and their results.",
            max_length=MAX_ID_CHARS,
            example="read_file",
        ),
    ] = None,
    conversation_id: Annotated[
        str | None,
        name_filter(
            "Only this conversation (its id, as its creator chose it).",
            max_length=MAX_ID_CHARS,
            example="user-123",
        ),
    ] = None,
    batch: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_INTEGER,
            description="Only messages that arrived while this batch was current.",
        ),
    ] = None,
    recorded_from: Annotated[
        datetime | None,
        Query(
            alias="from",
            description="Only messages recorded at or after this time (ISO 8601, with zone).",
            examples=["2026-01-01T00:00:00Z"],
        ),
    ] = None,
    recorded_to: Annotated[
        datetime | None,
        Query(
            alias="to",
            description="Only messages recorded before this time (ISO 8601, with zone).",
            examples=["2026-02-01T00:00:00Z"],
        ),
    ] = None,
    metadata: Annotated[
        str | None,
        Query(
            max_length=MAX_SEARCH_METADATA_CHARS,
            description="Only conversations whose metadata contains this JSON object (jsonb `@>`).",
            examples=['{"project": "atlas"}'],
        ),
    ] = None,
    limit: Annotated[
        int, limit_query(f"Hits per page, 1..{MAX_SEARCH_LIMIT}.", maximum=MAX_SEARCH_LIMIT)
    ] = DEFAULT_SEARCH_LIMIT,
    cursor: Annotated[
        str | None,
        cursor_query(
            "The previous page's `next_cursor`, for the next page.", max_length=MAX_CURSOR_CHARS
        ),
    ] = None,
) -> SearchPage:
    """Messages of every conversation of the tenant whose current text
    matches `q`, newest first, each with a snippet around the match
    (`highlights`: the matches' offsets in it). Compacted messages (of
    earlier batches) are found too; an edited message is found by its
    current content. A query or filter out of range is a 422 naming it."""
    query = search_query(
        q=q,
        mode=mode,
        role=role,
        agent_id=agent_id,
        kind=kind,
        tool_name=tool_name,
        conversation_id=conversation_id,
        batch=batch,
        recorded_from=recorded_from,
        recorded_to=recorded_to,
        metadata=_metadata(metadata),
        limit=limit,
        cursor=cursor,
    )
    return await repository.search_messages(query)
