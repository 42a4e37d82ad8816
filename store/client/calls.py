"""Each API operation as a `Call`: the request to send and how to read its answer.

Written once here, sent by `AsyncConvoClient` (which `ConvoClient` runs
for blocking code, store.client.blocking). A call checks
what it can before sending, with the library's own checks and errors
(a conversation id, a message, a batch operation), and reads answers as
the store's own values (`store.domain`): the HTTP shapes are those values'
JSON (api/schemas.py, the OpenAPI document).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter

from store.client.wire import (
    IDEMPOTENCY_HEADER,
    AgentState,
    Assembled,
    Call,
    answer_of,
    event_list,
    expected,
    message_list,
    no_answer,
    query,
    segment,
    version_of,
    window_slice,
    wire_messages,
)
from store.domain.context import AgentProfile, TodoItem
from store.domain.conversation_keys import ConversationRef, conversation_key
from store.domain.feed import FeedEvent, FeedPage
from store.domain.feed_vector import FeedVector, position_token
from store.domain.listing import ConversationPage, ConversationQuery, MessagePage, WindowSlice
from store.domain.messages import Content, Message, Role, StoredMessage
from store.domain.operations import (
    BatchOperation,
)
from store.domain.records import ExpectedVersion, FeedPosition
from store.domain.search import SearchPage, SearchQuery
from store.domain.values import Appended, Batch, BatchResult, Conversation, Scope, ToolBlock

T = TypeVar("T")


def _conversation_read(
    conversation_id: ConversationRef, under: str, read: Callable[[httpx.Response], T], **params: Any
) -> Call[T]:
    """A GET of what is `under` the conversation's path: safe to repeat."""
    key, path = segment(conversation_id)
    return Call(
        method="GET",
        path=f"/conversations/{path}{under}",
        params=query(**params),
        read=read,
        conversation_id=key,
        replayable=True,
    )


def _conversation_write(
    method: str,
    conversation_id: ConversationRef,
    under: str,
    read: Callable[[httpx.Response], T],
    body: Any = None,
    **params: Any,
) -> Call[T]:
    """A write to what is `under` the conversation's path. Not replayable:
    a lost answer may hide a stored write (the append, with its key, is)."""
    key, path = segment(conversation_id)
    return Call(
        method=method,
        path=f"/conversations/{path}{under}",
        params=query(**params),
        body=body,
        read=read,
        conversation_id=key,
    )


# --- conversations ---------------------------------------------------------------------


def create_conversation(
    conversation_id: ConversationRef | None, metadata: dict[str, Any] | None
) -> Call[Conversation]:
    key = None if conversation_id is None else conversation_key(conversation_id)
    return Call(
        method="POST",
        path="/conversations",
        body={"id": key, "metadata": metadata or {}},
        read=answer_of(Conversation),
        conversation_id=key,
    )


def get_conversation(conversation_id: ConversationRef) -> Call[Conversation]:
    return _conversation_read(conversation_id, "", answer_of(Conversation))


def list_conversations(search: ConversationQuery) -> Call[ConversationPage]:
    return Call(
        method="GET",
        path="/conversations",
        params=query(
            metadata=None if search.metadata is None else json.dumps(search.metadata),
            archived=search.archived,
            created_from=search.created_from,
            created_to=search.created_to,
            updated_from=search.updated_from,
            updated_to=search.updated_to,
            order=search.order,
            cursor=search.cursor,
            limit=search.limit,
        ),
        read=answer_of(ConversationPage),
        replayable=True,
    )


def update_metadata(
    conversation_id: ConversationRef,
    patch: dict[str, Any],
    *,
    replace: bool,
    expected_version: ExpectedVersion,
) -> Call[Conversation]:
    body = {
        "metadata": patch,
        "mode": "replace" if replace else "merge",
        "expected_version": expected(expected_version),
    }
    return _conversation_write("PATCH", conversation_id, "", answer_of(Conversation), body)


def set_archived(conversation_id: ConversationRef, archived: bool) -> Call[Conversation]:
    action = "/archive" if archived else "/unarchive"
    return _conversation_write("POST", conversation_id, action, answer_of(Conversation))


def delete(conversation_id: ConversationRef) -> Call[None]:
    return _conversation_write("DELETE", conversation_id, "", no_answer)


# --- messages ------------------------------------------------------------------------


def append_messages(
    conversation_id: ConversationRef,
    messages: Sequence[Message | dict[str, Any]],
    *,
    expected_version: ExpectedVersion,
    idempotency_key: str | None,
) -> Call[Appended]:
    """An append; with a key (the client makes one per append unless told
    not to), a retry is answered with what the first attempt stored."""
    key, path = segment(conversation_id)
    return Call(
        method="POST",
        path=f"/conversations/{path}/messages",
        body={"messages": wire_messages(messages), "expected_version": expected(expected_version)},
        headers={} if idempotency_key is None else {IDEMPOTENCY_HEADER: idempotency_key},
        read=answer_of(Appended),
        conversation_id=key,
        idempotency_key=idempotency_key,
        replayable=idempotency_key is not None,
    )


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def replace(
    conversation_id: ConversationRef, seq: int, content: Content, expected_version: ExpectedVersion
) -> Call[int]:
    body = {
        "content": TypeAdapter(Content).dump_python(content, mode="json"),
        "expected_version": expected(expected_version),
    }
    return _conversation_write("PUT", conversation_id, f"/messages/{seq}", version_of, body)


# --- agents --------------------------------------------------------------------------


def configure_agent(
    conversation_id: ConversationRef, profile: AgentProfile, expected_version: ExpectedVersion
) -> Call[int]:
    body = {
        "is_sub_agent": profile.is_sub_agent,
        "system_prompt": profile.system_prompt,
        "role_definition": profile.role_definition,
        "expected_version": expected(expected_version),
    }
    under = f"/agents/{quote(profile.agent_id, safe='')}"
    return _conversation_write("PUT", conversation_id, under, version_of, body)


def update_slot(
    conversation_id: ConversationRef,
    slot: str,
    value: str | Sequence[TodoItem] | None,
    *,
    agent_id: str,
    expected_version: ExpectedVersion,
) -> Call[int]:
    wire: Any = value
    if value is not None and not isinstance(value, str):
        wire = [TodoItem.model_validate(item).model_dump(mode="json") for item in value]
    body = {"value": wire, "expected_version": expected(expected_version)}
    under = f"/agents/{quote(agent_id, safe='')}/slots/{quote(slot, safe='')}"
    return _conversation_write("PUT", conversation_id, under, version_of, body)


def agent(conversation_id: ConversationRef, agent_id: str) -> Call[AgentState]:
    under = f"/agents/{quote(agent_id, safe='')}"
    return _conversation_read(conversation_id, under, answer_of(AgentState))


# --- batches, forks and pins ------------------------------------------------------------


def run_batch_operation(
    conversation_id: ConversationRef, operation: BatchOperation, expected_version: ExpectedVersion
) -> Call[BatchResult]:
    body = operation.model_dump(mode="json")
    body["expected_version"] = expected(expected_version)
    return _conversation_write("POST", conversation_id, "/batches", answer_of(BatchResult), body)


def batches(conversation_id: ConversationRef) -> Call[list[Batch]]:
    return _conversation_read(conversation_id, "/batches", answer_of(list[Batch]))


def batch_messages(conversation_id: ConversationRef, batch: int) -> Call[list[StoredMessage]]:
    return _conversation_read(conversation_id, f"/batches/{batch}/messages", message_list)


def fork(
    conversation_id: ConversationRef,
    *,
    new_conversation_id: ConversationRef | None,
    up_to_seq: int | None,
    agent_id: str | None,
    metadata: dict[str, Any] | None,
) -> Call[Conversation]:
    new_key = None if new_conversation_id is None else conversation_key(new_conversation_id)
    body = {
        "new_conversation_id": new_key,
        "up_to_seq": up_to_seq,
        "agent_id": agent_id,
        "metadata": metadata or {},
    }
    return _conversation_write("POST", conversation_id, "/fork", answer_of(Conversation), body)


def pin_message(
    conversation_id: ConversationRef, seq: int, pinned: bool, expected_version: ExpectedVersion
) -> Call[int]:
    return _conversation_write(
        "PUT" if pinned else "DELETE",
        conversation_id,
        f"/messages/{seq}/pin",
        version_of,
        expected_version=expected(expected_version),
    )


# --- reads ---------------------------------------------------------------------------


def read_window(
    conversation_id: ConversationRef,
    *,
    batch: int | None,
    agent_id: str | None,
    cursor: str | None,
    limit: int,
) -> Call[WindowSlice]:
    return _conversation_read(
        conversation_id,
        "/window",
        window_slice,
        batch=batch,
        agent_id=agent_id,
        cursor=cursor,
        limit=limit,
    )


def page_messages(
    conversation_id: ConversationRef,
    *,
    after_seq: int | None,
    before_seq: int | None,
    limit: int,
    order: Literal["asc", "desc"],
    role: Role | None,
    agent_id: str | None,
    kind: str | None,
    scope: Scope,
) -> Call[MessagePage]:
    return _conversation_read(
        conversation_id,
        "/messages",
        answer_of(MessagePage),
        after_seq=after_seq,
        before_seq=before_seq,
        limit=limit,
        order=order,
        role=role,
        agent_id=agent_id,
        kind=kind,
        scope=scope,
    )


def recent_by_role(
    conversation_id: ConversationRef, role: Role, n: int, scope: Scope, agent_id: str | None
) -> Call[list[StoredMessage]]:
    return _conversation_read(
        conversation_id,
        "/messages/recent",
        message_list,
        role=role,
        n=n,
        scope=scope,
        agent_id=agent_id,
    )


def role_range(
    conversation_id: ConversationRef, role: Role, first: int, last: int
) -> Call[list[StoredMessage]]:
    under = f"/roles/{quote(role, safe='')}"
    return _conversation_read(conversation_id, under, message_list, first=first, last=last)


def count_by_role(conversation_id: ConversationRef, scope: Scope) -> Call[dict[Role, int]]:
    return _conversation_read(conversation_id, "/counts", answer_of(dict[Role, int]), scope=scope)


def tool_blocks(
    conversation_id: ConversationRef, *, pending_only: bool, agent_id: str | None
) -> Call[list[ToolBlock]]:
    return _conversation_read(
        conversation_id,
        "/tool-blocks",
        answer_of(list[ToolBlock]),
        pending_only=pending_only,
        agent_id=agent_id,
    )


def search_messages(search: SearchQuery) -> Call[SearchPage]:
    return Call(
        method="GET",
        path="/messages/search",
        params=query(
            q=search.q,
            mode=search.mode,
            role=search.role,
            agent_id=search.agent_id,
            kind=None if search.kind is None else search.kind.value,
            tool_name=search.tool_name,
            conversation_id=search.conversation_id,
            batch=search.batch,
            metadata=None if search.metadata is None else json.dumps(search.metadata),
            limit=search.limit,
            cursor=search.cursor,
            **{"from": search.recorded_from, "to": search.recorded_to},
        ),
        read=answer_of(SearchPage),
        replayable=True,
    )


def assemble(
    conversation_id: ConversationRef, *, agent_id: str, format: str, options: dict[str, Any] | None
) -> Call[Assembled]:
    key, path = segment(conversation_id)
    return Call(
        method="POST",
        path=f"/conversations/{path}/assemble",
        body={"agent_id": agent_id, "format": format, "options": options or {}},
        read=answer_of(Assembled),
        conversation_id=key,
        replayable=True,  # it writes nothing
    )


def export(conversation_id: ConversationRef, *, events: bool) -> Call[None]:
    """The export's request (its lines are read as they stream, not by `read`)."""
    return _conversation_read(conversation_id, "/export", no_answer, events=events)


# --- the feed ------------------------------------------------------------------------


def read_events(after: FeedVector | FeedPosition | str | None, limit: int) -> Call[FeedPage]:
    return Call(
        method="GET",
        path="/events",
        params=query(after=position_token(after), limit=limit),
        read=answer_of(FeedPage),
        replayable=True,
    )


def conversation_events(
    conversation_id: ConversationRef, *, from_version: int, limit: int
) -> Call[list[FeedEvent]]:
    return _conversation_read(
        conversation_id, "/events", event_list, from_version=from_version, limit=limit
    )
