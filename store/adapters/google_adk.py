"""A Google ADK session service (`BaseSessionService`) over convo-store.

    from google.adk.runners import Runner
    from store.adapters.google_adk import ConvoSessionService

    runner = Runner(agent=agent, app_name="app", session_service=ConvoSessionService(repository))

How a session is kept (docs/adapters.md has the table):
- a session is a conversation, its id `adk:<app>:<user>:<session>` (each
  part %-quoted; after `delete_session` the id stays a tombstone, so the
  session's next conversation is `...~2`), its metadata
  `{"adk": {"app", "user", "session"}}` (what `list_sessions` filters on);
- each event is one message, in order: user text → a user message, the
  model's text and function calls → an assistant message with tool calls,
  a function response → the tool result answering its call; everything
  else the event carries (id, author, invocation id, timestamp, actions
  with their state delta, usage, ...) is kept in the message's metadata
  under `convo_adapter`, so `get_session` returns the events as appended.
  An event that does not map (no content, files, several responses, ...)
  is kept opaque: the whole event in the metadata (or, when larger than
  metadata may be, in the content) under a `[adk event: <author>]` label;
- state: the session's keys in the conversation's slot `state` (agent
  `adk`), `app:` keys in the conversation `adk-app:<app>`, `user:` keys in
  `adk-user:<app>:<user>`, each a JSON object updated under the store's
  optimistic concurrency; `temp:` keys are never stored (as ADK's own
  services). An event is appended first, then its state delta applied.

Concurrent `append_event`s on one session are serialised by the store and
none is refused or lost (a session object read earlier is not "stale").
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from typing import Any, cast
from urllib.parse import quote

from google.adk.events import Event
from google.adk.events.event import NodeInfo
from google.adk.events.event_actions import EventActions
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.adk.sessions.state import State
from google.genai import types
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from store.adapters._conversation import (
    ADAPTER_KEY,
    Conversation,
    adapter_meta,
    live_key,
    raw_call_id,
)
from store.adapters._parts import Unmapped
from store.adapters._trusted import Constructor, checkers, plain
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationNotFound,
)
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.listing import ConversationQuery
from store.domain.messages import Message, StoredMessage, TextPart, ToolCall
from store.repository import ConversationRepository

__all__ = ["ConvoSessionService", "event_to_message", "message_to_event"]

FORMAT = "google-adk"
AGENT = "adk"
STATE_SLOT = "state"
RETRIES = 64
MAX_CONVERSATIONS = 256  # conversations whose tool-call ids a service keeps in memory


def _part(value: str) -> str:
    return quote(value, safe="")


def session_key(app_name: str, user_id: str, session_id: str) -> str:
    return f"adk:{_part(app_name)}:{_part(user_id)}:{_part(session_id)}"


# --- events <-> messages ------------------------------------------------------------


def _meta(kind: str, **fields: Any) -> dict[str, Any]:
    return {ADAPTER_KEY: {"format": FORMAT, "kind": kind, **fields}}


def event_to_message(event: Event) -> Message:
    """An ADK event as one message (tool call ids as ADK's)."""
    dumped = event.model_dump(exclude_none=True, mode="json")
    try:
        message = _structured(dumped)
        if _event_data(message) == dumped:
            return message
    except (Unmapped, ValidationError, KeyError, TypeError, ValueError):
        pass
    return _opaque(dumped)


def _structured(dumped: dict[str, Any]) -> Message:
    rest = dict(dumped)
    content = rest.pop("content", None)
    if not isinstance(content, dict) or set(content) - {"parts", "role"}:
        raise Unmapped("content")
    role = content.get("role")
    texts: list[str] = []
    calls: list[ToolCall] = []
    shapes: list[Any] = []
    responses = []
    for part in content.get("parts") or []:
        if set(part) == {"text"}:
            texts.append(part["text"])
            shapes.append("t")
        elif set(part) == {"function_call"} and role == "model":
            call = part["function_call"]
            if set(call) - {"id", "name", "args"} or "id" not in call:
                raise Unmapped("function call")
            calls.append(ToolCall(id=call["id"], name=call["name"], arguments=call.get("args", {})))
            shapes.append(["c", "args" in call])
        elif set(part) == {"function_response"}:
            responses.append(part["function_response"])
        else:
            raise Unmapped("part")
    if responses:
        response = responses[0]
        if len(responses) != 1 or shapes or set(response) != {"id", "name", "response"}:
            raise Unmapped("function responses")
        return Message(
            role="tool",
            tool_call_id=response["id"],
            content=json.dumps(response["response"], ensure_ascii=False),
            metadata=_meta("response", event=rest, role=role, name=response["name"]),
        )
    if role not in ("user", "model") or not shapes:
        raise Unmapped("role")
    text: str | tuple[TextPart, ...] = (
        texts[0] if len(texts) == 1 else tuple(TextPart(text=t) for t in texts)
    )
    return Message(
        role="user" if role == "user" else "assistant",
        content=text,
        tool_calls=tuple(calls),
        metadata=_meta("content", event=rest, role=role, shapes=shapes),
    )


def _opaque(dumped: dict[str, Any]) -> Message:
    author = str(dumped.get("author", ""))
    role = "user" if author == "user" else "assistant"
    label = f"[adk event: {author[:100]}]"
    if json_problem({"event": dumped}, max_chars=MAX_METADATA_CHARS - 200) is None:
        return Message(role=role, content=label, metadata=_meta("opaque", event=dumped))
    return Message(
        role=role,
        content=json.dumps(dumped, ensure_ascii=False),
        metadata=_meta("opaque", event_in="content", label=label),
    )


def _orphan(message: Message) -> Message:
    """A function response whose call is not pending: kept opaque."""
    return _opaque(_event_data(message))


def _event_data(message: Message) -> dict[str, Any]:
    meta = adapter_meta(message)
    kind = meta.get("kind") if meta.get("format") == FORMAT else None
    if kind == "opaque":
        if meta.get("event_in") == "content":
            return cast(dict[str, Any], json.loads(message.text))
        return cast(dict[str, Any], meta["event"])
    if kind == "response":
        response = {
            "id": raw_call_id(message, message.tool_call_id or ""),
            "name": meta["name"],
            "response": json.loads(message.text),
        }
        return {
            **meta["event"],
            "content": {"parts": [{"function_response": response}], "role": meta["role"]},
        }
    if kind == "content":
        texts = (
            [message.content]
            if isinstance(message.content, str)
            else [p.text for p in message.content if isinstance(p, TextPart)]
        )
        calls = iter(message.tool_calls)
        parts: list[dict[str, Any]] = []
        for shape in meta["shapes"]:
            if shape == "t":
                parts.append({"text": texts.pop(0)})
            else:
                call = next(calls)
                found: dict[str, Any] = {"id": raw_call_id(message, call.id), "name": call.name}
                if shape[1]:
                    found["args"] = call.arguments
                parts.append({"function_call": found})
        return {**meta["event"], "content": {"parts": parts, "role": meta["role"]}}
    # Written by someone else: a plain event of its text.
    stored = message if isinstance(message, StoredMessage) else None
    return {
        "id": f"convo-{stored.seq}" if stored else "convo",
        "invocation_id": "",
        "author": "user" if message.role == "user" else "model",
        "timestamp": stored.recorded_at.timestamp() if stored and stored.recorded_at else 0.0,
        "content": {
            "parts": [{"text": message.text}],
            "role": "user" if message.role == "user" else "model",
        },
    }


def message_to_event(message: Message) -> Event:
    """A stored message back as the event it was appended as."""
    data = _event_data(message)
    meta = adapter_meta(message)
    if meta.get("format") == FORMAT and meta.get("kind") in ("content", "response"):
        built = _rebuilt(data)
        if built is not None:
            return built
    return Event.model_validate(data)


# --- events rebuilt without validation ------------------------------------------------
#
# A session's events are read far more often than written, and ADK's models
# validate slowly (google-genai checks every field of every part). What an
# adapter wrote was an ADK event, validated, dumped as JSON: read back, its
# text, function calls and responses and its plain fields are set as they
# are (`store.adapters._trusted`), each field's JSON type checked first.
# Anything else (a model-valued field, a value of another type, an event
# kept opaque or written by someone else) is validated as usual.

_EVENT_FIELDS = checkers(Event)
_ACTION_FIELDS = checkers(EventActions)
_NODE_FIELDS = checkers(NodeInfo)
_REBUILT_APART = frozenset({"content", "actions", "node_info", "long_running_tool_ids"})
_new_event = Constructor(Event)
_new_actions = Constructor(EventActions)
_new_node = Constructor(NodeInfo)
_new_content = Constructor(types.Content)
_new_part = Constructor(types.Part)
_new_call = Constructor(types.FunctionCall)
_new_response = Constructor(types.FunctionResponse)


def _rebuilt(data: dict[str, Any]) -> Event | None:
    """The event `data` describes, built without validation; None when
    some of it must be validated."""
    fields = {k: v for k, v in data.items() if k not in _REBUILT_APART}
    if type(data.get("timestamp")) is int:
        fields["timestamp"] = float(data["timestamp"])
    ids = data.get("long_running_tool_ids")
    if not (
        plain(fields, _EVENT_FIELDS)
        and plain(data.get("actions", {}), _ACTION_FIELDS)
        and plain(data.get("node_info", {}), _NODE_FIELDS)
        and (ids is None or (type(ids) is list and all(type(i) is str for i in ids)))
    ):
        return None
    content = _content(data["content"])
    if content is None:
        return None
    if "actions" in data:
        fields["actions"] = _new_actions(**data["actions"])
    if "node_info" in data:
        fields["node_info"] = _new_node(**data["node_info"])
    if ids is not None:
        fields["long_running_tool_ids"] = set(ids)
    return _new_event(content=content, **fields)


def _content(data: dict[str, Any]) -> types.Content | None:
    """The content `_event_data` made of a content or response message."""
    parts = []
    for part in data["parts"]:
        if "text" in part:
            parts.append(_new_part(text=part["text"]))
        elif "function_call" in part:
            call = part["function_call"]
            if "args" in call and type(call["args"]) is not dict:
                return None
            parts.append(_new_part(function_call=_new_call(**call)))
        else:
            response = part["function_response"]
            if type(response["response"]) is not dict:
                return None
            parts.append(_new_part(function_response=_new_response(**response)))
    return _new_content(parts=parts, role=data["role"])


# --- the service ----------------------------------------------------------------------


class ConvoSessionService(BaseSessionService):
    """ADK sessions in convo-store conversations (see the module docstring).

    `repository`: any `store.repository.Repository`; the service talks to
    nothing else."""

    def __init__(self, repository: ConversationRepository) -> None:
        self.repository = repository
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()

    def _conversation(self, key: str) -> Conversation:
        found = self._conversations.get(key)
        if found is None:
            found = Conversation(self.repository, key)
            found._exists = True
            self._conversations[key] = found
            while len(self._conversations) > MAX_CONVERSATIONS:
                self._conversations.popitem(last=False)
        self._conversations.move_to_end(key)
        return found

    # --- state ---------------------------------------------------------------------------

    async def _state(self, key: str) -> dict[str, Any]:
        try:
            slots = await self.repository.context_slots(key, AGENT)
        except ConversationNotFound:
            return {}
        text = slots.custom.get(STATE_SLOT)
        return cast(dict[str, Any], json.loads(text)) if text else {}

    async def _merge_state(self, key: str, delta: dict[str, Any], *, create: bool) -> None:
        """`delta` merged into the state kept at conversation `key`."""
        delta = cast(dict[str, Any], to_jsonable_python(delta))
        for _ in range(RETRIES):
            try:
                version = (await self.repository.get_conversation(key)).version
            except ConversationNotFound:
                if not create:
                    raise
                with contextlib.suppress(ConcurrencyConflict):
                    await self.repository.create_conversation(key, metadata={"adk_state": True})
                continue
            merged = {**await self._state(key), **delta}
            try:
                written = await self.repository.update_slot(
                    key,
                    STATE_SLOT,
                    json.dumps(merged, ensure_ascii=False),
                    agent_id=AGENT,
                    expected_version=version,
                )
                if key in self._conversations:
                    self._conversations[key].wrote(written)
                return
            except ConcurrencyConflict:
                continue
        raise ConcurrencyConflict(key, "the state kept changing", None)  # pragma: no cover

    async def _scoped(self, app_name: str, user_id: str, state: dict[str, Any]) -> None:
        """Apply `state`'s `app:` and `user:` keys to the app's and the user's state."""
        app, user = {}, {}
        for name, value in state.items():
            if name.startswith(State.APP_PREFIX):
                app[name.removeprefix(State.APP_PREFIX)] = value
            elif name.startswith(State.USER_PREFIX):
                user[name.removeprefix(State.USER_PREFIX)] = value
        if app:
            await self._merge_state(f"adk-app:{_part(app_name)}", app, create=True)
        if user:
            key = f"adk-user:{_part(app_name)}:{_part(user_id)}"
            await self._merge_state(key, user, create=True)

    @staticmethod
    def _session_only(state: dict[str, Any]) -> dict[str, Any]:
        prefixes = (State.APP_PREFIX, State.USER_PREFIX, State.TEMP_PREFIX)
        return {k: v for k, v in state.items() if not k.startswith(prefixes)}

    async def _merged(self, app_name: str, user_id: str, key: str) -> dict[str, Any]:
        state = await self._state(key)
        for name, value in (await self._state(f"adk-app:{_part(app_name)}")).items():
            state[State.APP_PREFIX + name] = value
        for name, value in (await self.get_user_state(app_name=app_name, user_id=user_id)).items():
            state[State.USER_PREFIX + name] = value
        return state

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._state(f"adk-user:{_part(app_name)}:{_part(user_id)}")

    # --- sessions ------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        from google.adk.errors.already_exists_error import AlreadyExistsError
        from google.adk.platform import uuid as platform_uuid

        session_id = (session_id or "").strip() or platform_uuid.new_uuid()
        key, exists = await live_key(self.repository, session_key(app_name, user_id, session_id))
        if exists:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        try:
            created = await self.repository.create_conversation(
                key, metadata={"adk": {"app": app_name, "user": user_id, "session": session_id}}
            )
        except ConcurrencyConflict:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        await self._scoped(app_name, user_id, state or {})
        own = self._session_only(state or {})
        if own:
            await self._merge_state(key, own, create=False)
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(app_name, user_id, key),
            last_update_time=created.started_at.timestamp(),
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = session_id.strip() if session_id else session_id
        key, exists = await live_key(self.repository, session_key(app_name, user_id, session_id))
        if not exists:
            return None
        conversation = await self.repository.get_conversation(key)
        recent = config.num_recent_events if config else None
        if recent == 0:
            messages: list[StoredMessage] = []
        elif recent is not None:
            messages = await self._last(key, recent)
        else:
            messages = await self.repository.visible_window(key)
        events = [message_to_event(m) for m in messages]
        if config and config.after_timestamp is not None:
            older = [i for i, e in enumerate(events) if e.timestamp < config.after_timestamp]
            if older:
                events = events[older[-1] + 1 :]
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(app_name, user_id, key),
            events=events,
            last_update_time=(conversation.updated_at or conversation.started_at).timestamp(),
        )

    async def _last(self, key: str, n: int) -> list[StoredMessage]:
        """The last `n` messages, oldest first (read from the end: O(n))."""
        found: list[StoredMessage] = []
        before = None
        while len(found) < n:
            limit = min(1000, n - len(found))
            page = await self.repository.read_messages(
                key, before_seq=before, limit=limit, order="desc"
            )
            found.extend(page)
            if len(page) < limit:
                break
            before = page[-1].seq
        return found[::-1]

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The sessions without their events, least recently updated first."""
        where: dict[str, Any] = {"app": app_name}
        if user_id is not None:
            where["user"] = user_id
        sessions = []
        cursor = None
        while True:
            page = await self.repository.list_conversations(
                ConversationQuery(metadata={"adk": where}, cursor=cursor, limit=100)
            )
            for conversation in page.items:
                info = conversation.metadata["adk"]
                sessions.append(
                    Session(
                        id=info["session"],
                        app_name=app_name,
                        user_id=info["user"],
                        state=await self._merged(app_name, info["user"], conversation.id),
                        last_update_time=(
                            conversation.updated_at or conversation.started_at
                        ).timestamp(),
                    )
                )
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session's conversation (the store's `delete`: its
        events and views are purged)."""
        session_id = session_id.strip() if session_id else session_id
        key, exists = await live_key(self.repository, session_key(app_name, user_id, session_id))
        if exists:
            self._conversations.pop(key, None)
            with contextlib.suppress(ConversationNotFound, ConversationDeleted):
                await self.repository.delete(key)

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        from google.adk.errors.session_not_found_error import SessionNotFoundError

        key, exists = await live_key(
            self.repository, session_key(session.app_name, session.user_id, session.id)
        )
        if not exists:
            raise SessionNotFoundError(f"Session {session.id} not found.")
        # Temp state applied to the session object and trimmed from the event.
        await super().append_event(session=session, event=event)
        await self._conversation(key).append([event_to_message(event)], _orphan)
        delta = event.actions.state_delta if event.actions else None
        if delta:
            await self._scoped(session.app_name, session.user_id, delta)
            own = self._session_only(delta)
            if own:
                await self._merge_state(key, own, create=False)
        session.last_update_time = event.timestamp
        return event
