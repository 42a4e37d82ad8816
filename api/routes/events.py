"""The event feed for downstream consumers: pages of the key's tenant's
events, one conversation's events, and a live tail as Server-Sent Events.

A reader's place is a checkpoint: an opaque token holding a position per
partition of the feed (store.domain.feed_vector); the checkpoint of before
partitions, `<transaction_id>-<position>`, is still read. A token that is
not one is a 422 naming what is wrong with it, before anything streams.

The tail (`GET /events/stream`) sends each event as

    id: <checkpoint>
    event: <type>
    data: <the event as JSON>

and, after `heartbeat` seconds without one, a comment that also moves the
resume point past the other tenants' events it scanned:

    : heartbeat
    id: <checkpoint>

A client that reconnects sends `Last-Event-ID` (EventSource does) and
resumes right after it. When the key is revoked or expires, the tail ends
with an `error` event carrying the problem (api.revocation). How the
tail waits and why it polls rather than LISTENs: store.domain.feed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from api.deps import KeyWatchDep, RepositoryDep
from api.errors import CONVERSATION_ERRORS
from api.revocation import sse_ended
from api.routes.parameters import limit_query
from api.routing import JSONRoute
from api.schemas import ConversationIdPath
from store.domain.feed import (
    HEARTBEAT_SECONDS,
    MAX_FEED_LIMIT,
    ConversationEvents,
    FeedPage,
)
from store.domain.feed_vector import MAX_TOKEN_CHARS, FeedVector
from store.domain.inputs import MAX_BIGINT
from store.repository import Repository

router = APIRouter(tags=["events"], responses=CONVERSATION_ERRORS, route_class=JSONRoute)

# The characters a token (or a checkpoint of before partitions) is made of;
# what it says is checked by `Repository.feed_position`, which names the problem.
CHECKPOINT = r"^[A-Za-z0-9._-]+$"

AfterQuery = Annotated[
    str | None,
    Query(
        pattern=CHECKPOINT,
        max_length=MAX_TOKEN_CHARS,
        description="A checkpoint (`next` of the previous page, or an event's `checkpoint`):"
        " the events after it. Omitted: from the beginning.",
        examples=["v1.MDo4MTItNDAzMTE"],
    ),
]
LimitQuery = Annotated[
    int, limit_query(f"At most this many events (1-{MAX_FEED_LIMIT}).", maximum=MAX_FEED_LIMIT)
]


@router.get(
    "/events",
    operation_id="readEvents",
    summary="A page of the tenant's events, in feed order",
)
async def read_events(
    repository: RepositoryDep, after: AfterQuery = None, limit: LimitQuery = 100
) -> FeedPage:
    """Every event of the key's tenant's conversations, in one order every
    reader shares, never skipping one that commits late. Read on with
    `after=next`; `more: false` means the feed is read to its current end."""
    return await repository.read_events(after=after, limit=limit)


@router.get(
    "/conversations/{conversation_id}/events",
    operation_id="readConversationEvents",
    summary="A page of one conversation's events, by version",
)
async def read_conversation_events(
    conversation_id: ConversationIdPath,
    repository: RepositoryDep,
    from_version: Annotated[
        int, Query(ge=1, le=MAX_BIGINT, description="The first version to return (1-based).")
    ] = 1,
    limit: LimitQuery = 100,
) -> ConversationEvents:
    """The conversation's events from `from_version` on; read on with
    `from_version=next_from_version`."""
    events = await repository.conversation_events(
        conversation_id, from_version=from_version, limit=limit
    )
    following = events[-1].version + 1 if events else from_version
    return ConversationEvents(events=events, next_from_version=following)


async def _server_sent_events(
    repository: Repository, after: FeedVector, heartbeat: float
) -> AsyncIterator[bytes]:
    yield b": connected\n\n"
    async for page in repository.tail(after, heartbeat=heartbeat):
        if not page.events:
            yield f": heartbeat\nid: {page.next}\n\n".encode()
            continue
        yield "".join(
            f"id: {e.checkpoint}\nevent: {e.type}\ndata: {e.model_dump_json()}\n\n"
            for e in page.events
        ).encode()


@router.get(
    "/events/stream",
    operation_id="tailEvents",
    summary="Tail the tenant's events (Server-Sent Events)",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {
                "text/event-stream": {
                    # One SSE message: `data` is the event's JSON.
                    "schema": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "The event's checkpoint."},
                            "event": {"type": "string", "description": "The event's type."},
                            "data": {"type": "string", "description": "The event, as JSON."},
                        },
                    }
                }
            },
            "description": "One SSE message per event (`id` is its checkpoint), and"
            " heartbeat comments.",
        }
    },
)
async def tail_events(
    repository: RepositoryDep,
    watch: KeyWatchDep,
    after: Annotated[
        str | None,
        Query(
            pattern=CHECKPOINT,
            max_length=MAX_TOKEN_CHARS,
            description="Start after this checkpoint. Omitted (and no Last-Event-ID):"
            " only events from now on.",
            examples=["v1.MDo4MTItNDAzMTE"],
        ),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            pattern=CHECKPOINT,
            max_length=MAX_TOKEN_CHARS,
            description="Sent by a reconnecting EventSource: resume after it (wins over `after`).",
        ),
    ] = None,
    heartbeat: Annotated[
        float,
        Query(
            ge=0.05,
            le=300,
            description="Seconds without an event before a heartbeat comment.",
        ),
    ] = HEARTBEAT_SECONDS,
) -> StreamingResponse:
    """The key's tenant's events as they commit, as Server-Sent Events; an
    event that commits late is never skipped. When the key is revoked or
    expires, the stream ends within a second with an `error` event whose
    data is the problem (`Unauthorized`)."""
    given = last_event_id or after
    # Checked and read here, not in the stream: a bad token is a 422 and a
    # database that is down a 503, not a stream that breaks.
    if given is None:
        start = await repository.feed_head()
    else:
        start = repository.feed_position(given)
    return StreamingResponse(
        watch.guard(_server_sent_events(repository, start, heartbeat), sse_ended()),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
