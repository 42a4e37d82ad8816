"""What both adapters need from the store, built from the repository's
existing methods: a conversation per framework session id, appends whose
tool calls and results are matched by the framework's call ids, popping the
last message, and clearing the window.

The framework's call ids are not always usable as the store's: the store
never reuses a tool call id in a conversation (popped or cleared calls keep
theirs in the log), and it never hides a call still waiting for its result.
So a call is stored under the framework's id when that id is free, else
under `<id>~<8 hex>`, and the framework's id is kept in the message's
metadata (`ADAPTER_KEY` → `"call_id"`). A tool result is pointed at the
newest pending call with its framework id. Calls left pending when their
message must be hidden are closed first with an *internal* result (an empty
tool message marked `"internal": true`), which the adapters never show.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from store.domain.conversation_keys import conversation_key
from store.domain.errors import (
    BoundaryError,
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationNotFound,
)
from store.domain.feed import MAX_FEED_LIMIT
from store.domain.messages import Message, StoredMessage, ToolCall
from store.domain.records import StreamState
from store.domain.values import Appended
from store.repository import ConversationRepository

ADAPTER_KEY = "convo_adapter"
"""The metadata key under which an adapter keeps what the store has no field for."""

RETRIES = 8
# An append with tool calls is retried while other writers keep moving the
# conversation (each retry first learns what they wrote).
APPEND_RETRIES = 64


def adapter_meta(message: Message) -> dict[str, Any]:
    found = message.metadata.get(ADAPTER_KEY)
    return found if isinstance(found, dict) else {}


def is_internal(message: Message) -> bool:
    return bool(adapter_meta(message).get("internal"))


def raw_call_id(message: Message, store_id: str) -> str:
    """The framework's id of a call (or of the call a tool result answers)."""
    renamed = adapter_meta(message).get("call_ids")
    if isinstance(renamed, dict):
        raw = renamed.get(store_id)
        if isinstance(raw, str):
            return raw
    return store_id


def _fresh(raw: str) -> str:
    return f"{raw[:190]}~{uuid.uuid4().hex[:8]}"


_FRESH = re.compile(r"(.+)~[0-9a-f]{8}")


def _raw_of(store_id: str) -> str:
    found = _FRESH.fullmatch(store_id)
    return found.group(1) if found else store_id


def _with_meta(message: Message, **fields: Any) -> Message:
    meta = {**adapter_meta(message), **fields}
    return message.model_copy(update={"metadata": {**message.metadata, ADAPTER_KEY: meta}})


class Conversation:
    """One framework session's conversation in a repository."""

    def __init__(self, repository: ConversationRepository, session_id: str) -> None:
        self.repository = repository
        self.session_id = session_id
        # A framework's session id is the conversation's id (unique per
        # tenant: store.domain.conversation_keys); it is checked on first use.
        self.id = conversation_key(session_id)
        self._exists = False
        # Tool call ids this conversation has used, all of them up to the
        # conversation's version `_calls_at` (read once, then kept up to
        # date): a framework's call id that is taken is stored under a
        # fresh one before the append is sent. An append with calls is
        # guarded by that version, so a call id another writer used since
        # is learnt from the log and decided here too: neither the store
        # nor the database ever has to refuse one.
        self._used_calls: set[str] | None = None
        self._calls_at = 0

    async def ensure(self) -> None:
        """Create the conversation on first use; a concurrent creator wins
        harmlessly (its ConcurrencyConflict means it exists)."""
        if self._exists:
            return
        with contextlib.suppress(ConcurrencyConflict):
            await self.repository.create_conversation(
                self.id, metadata={"session_id": self.session_id[:1000]}
            )
        self._exists = True

    async def window(self) -> list[StoredMessage]:
        try:
            return await self.repository.visible_window(self.id)
        except ConversationNotFound:
            return []

    async def shown(self) -> list[StoredMessage]:
        """The visible window without the adapters' internal messages."""
        return [m for m in await self.window() if not is_internal(m)]

    async def last_shown(self, n: int) -> list[StoredMessage]:
        """The last `n` shown messages, oldest first: read from the end
        (`read_messages(order="desc")`), so O(n) whatever the window's
        length. The adapters only append, so seq order is window order."""
        found: list[StoredMessage] = []
        before: int | None = None
        while len(found) < n:
            # A few more than needed: internal results are skipped.
            limit = min(1000, n - len(found) + 8)
            try:
                page = await self.repository.read_messages(
                    self.id, before_seq=before, limit=limit, order="desc", scope="visible"
                )
            except ConversationNotFound:
                return []
            found.extend(m for m in page if not is_internal(m))
            if len(page) < limit:
                break
            before = page[-1].seq
        return found[:n][::-1]

    # --- appends -----------------------------------------------------------------------

    async def append(
        self, drafts: Sequence[Message], orphan: Callable[[Message], Message]
    ) -> Appended | None:
        """Append messages whose tool calls and results carry framework ids.
        A result whose call is not pending is stored as `orphan(result)`.
        The stored messages are in the order of `drafts`."""
        if not drafts:
            return None
        await self.ensure()
        with_calls = any(d.tool_calls for d in drafts)
        for attempt in range(APPEND_RETRIES):
            used = await self._used_call_ids()
            # Pending calls matter only to the results among the drafts.
            blocks = (
                await self.repository.tool_blocks(self.id, pending_only=True)
                if any(d.role == "tool" for d in drafts)
                else []
            )
            pending = {b.call_id: b.assistant_seq for b in blocks}
            messages = self._resolve(drafts, pending, orphan, used=used)
            known_at = self._calls_at
            try:
                appended = await self.repository.append_messages(
                    self.id, messages, expected_version=known_at if with_calls else StreamState.ANY
                )
            except ConcurrencyConflict:
                if attempt == APPEND_RETRIES - 1:
                    raise
                # Another writer came between: learn the calls it made.
                await self._catch_up()
                await asyncio.sleep(random.uniform(0, min(0.001 * attempt, 0.02)))
                continue
            used.update(c.id for m in messages for c in m.tool_calls)
            self.wrote(appended.version, len(messages), known_at)
            return appended
        raise AssertionError("unreachable: the last attempt returns or raises")

    def wrote(self, version: int, events: int = 1, known_at: int | None = None) -> None:
        """This process's write of `events` events, the last at `version`,
        made no call unknown here: the call ids stay complete up to it when
        they were just before it."""
        if version - events == (self._calls_at if known_at is None else known_at):
            self._calls_at = max(self._calls_at, version)

    async def _used_call_ids(self) -> set[str]:
        if self._used_calls is None:
            try:
                version = (await self.repository.get_conversation(self.id)).version
                blocks = await self.repository.tool_blocks(self.id)
            except ConversationNotFound:
                version, blocks = 0, []
            self._used_calls = {b.call_id for b in blocks}
            self._calls_at = version
        return self._used_calls

    async def _catch_up(self) -> None:
        """The calls appended since `_calls_at`, read from the log."""
        used = await self._used_call_ids()
        while True:
            events = await self.repository.conversation_events(
                self.id, from_version=self._calls_at + 1, limit=MAX_FEED_LIMIT
            )
            for event in events:
                if event.type == "message_appended":
                    message = event.data.get("message") or {}
                    used.update(str(c["id"]) for c in message.get("tool_calls") or ())
            if events:
                self._calls_at = max(self._calls_at, events[-1].version)
            if len(events) < MAX_FEED_LIMIT:
                return

    @staticmethod
    def _resolve(
        drafts: Sequence[Message],
        pending: dict[str, int],
        orphan: Callable[[Message], Message],
        *,
        used: set[str],
    ) -> list[Message]:
        # framework call id -> store id of its newest unanswered call
        open_calls: dict[str, str] = {}
        for store_id, _seq in sorted(pending.items(), key=lambda kv: kv[1]):
            open_calls[_raw_of(store_id)] = store_id
        resolved: list[Message] = []
        for draft in drafts:
            if draft.tool_calls:
                calls = []
                renamed: dict[str, str] = {}
                for call in draft.tool_calls:
                    taken = call.id in used or call.id in open_calls
                    store_id = _fresh(call.id) if taken else call.id
                    if store_id != call.id:
                        renamed[store_id] = call.id
                    open_calls[call.id] = store_id
                    calls.append(ToolCall(id=store_id, name=call.name, arguments=call.arguments))
                message = draft.model_copy(update={"tool_calls": tuple(calls)})
                if renamed:
                    message = _with_meta(message, call_ids=renamed)
                resolved.append(message)
            elif draft.role == "tool" and draft.tool_call_id is not None:
                raw = draft.tool_call_id
                if raw not in open_calls:
                    resolved.append(orphan(draft))
                    continue
                store_id = open_calls.pop(raw)
                message = draft.model_copy(update={"tool_call_id": store_id})
                if store_id != raw:
                    message = _with_meta(message, call_ids={store_id: raw})
                resolved.append(message)
            else:
                resolved.append(draft)
        return resolved

    # --- pop and clear ------------------------------------------------------------------

    async def pop(self, orphan: Callable[[Message], Message]) -> StoredMessage | None:
        """Hide the last shown message (an event: the log keeps it).

        A plain last message is hidden with `truncate(remove_last=...)`. When
        it is a tool call or a tool result, hiding it alone would split a
        tool block or hide a pending call, which the store refuses; so the
        shortest tail holding it in whole blocks is hidden (its pending calls
        closed first by internal results) and the tail's other messages are
        appended again, their calls under fresh ids.
        """
        for _ in range(RETRIES):
            window = await self.window()
            shown = [m for m in window if not is_internal(m)]
            if not shown:
                return None
            last = shown[-1]
            start = _tail_start(window, window.index(last))
            tail = window[start:]
            pending_ids = {
                b.call_id for b in await self.repository.tool_blocks(self.id, pending_only=True)
            }
            open_in_tail = [c for m in tail for c in m.tool_calls if c.id in pending_ids]
            version = (await self.repository.get_conversation(self.id)).version
            try:
                if open_in_tail:
                    version = await self._close(open_in_tail, version)
                    continue  # look again: the closing results are in the tail now
                await self.repository.truncate(
                    self.id, remove_last=len(tail), expected_version=version
                )
            except (ConcurrencyConflict, BoundaryError):
                continue
            again = [m.as_message() for m in tail if m is not last and not is_internal(m)]
            if again:
                await self.append([_framework_ids(m) for m in again], orphan)
            return last
        raise RuntimeError("could not pop: the conversation kept changing")  # pragma: no cover

    async def _close(self, calls: Sequence[ToolCall], version: int) -> int:
        results = [
            Message(
                role="tool",
                tool_call_id=call.id,
                content="",
                is_error=True,
                metadata={ADAPTER_KEY: {"internal": True}},
            )
            for call in calls
        ]
        appended = await self.repository.append_messages(self.id, results, expected_version=version)
        return appended.version

    async def clear(self) -> None:
        """Empty the window (clear with keep_system=False); history stays.
        Pending calls are closed first by internal results."""
        for _ in range(RETRIES):
            try:
                conversation = await self.repository.get_conversation(self.id)
            except ConversationNotFound:
                return
            version = conversation.version
            pending = await self.repository.tool_blocks(self.id, pending_only=True)
            try:
                if pending:
                    version = await self._close(
                        [ToolCall(id=b.call_id, name=b.tool_name) for b in pending], version
                    )
                await self.repository.clear(self.id, keep_system=False, expected_version=version)
                return
            except (ConcurrencyConflict, BoundaryError):
                continue
        raise RuntimeError("could not clear: the conversation kept changing")  # pragma: no cover


def _framework_ids(message: Message) -> Message:
    """A stored message back with the framework's call ids (to append again)."""
    meta = dict(adapter_meta(message))
    meta.pop("call_ids", None)
    update: dict[str, Any] = {"client_message_id": None}
    if message.tool_calls:
        update["tool_calls"] = tuple(
            c.model_copy(update={"id": raw_call_id(message, c.id)}) for c in message.tool_calls
        )
    if message.tool_call_id is not None:
        update["tool_call_id"] = raw_call_id(message, message.tool_call_id)
    metadata = {**message.metadata}
    if meta:
        metadata[ADAPTER_KEY] = meta
    else:
        metadata.pop(ADAPTER_KEY, None)
    update["metadata"] = metadata
    return message.model_copy(update=update)


def _tail_start(window: Sequence[Message], index: int) -> int:
    """The first position of the shortest tail from `index` that holds
    whole tool blocks: every result in it has its call in it too."""
    call_at: dict[str, int] = {}
    for i, message in enumerate(window):
        for call in message.tool_calls:
            call_at[call.id] = i
    start = index
    changed = True
    while changed:
        changed = False
        for message in window[start:]:
            at = call_at.get(message.tool_call_id or "")
            if at is not None and at < start:
                start, changed = at, True
                break
    return start


async def live_key(repository: ConversationRepository, base: str) -> tuple[str, bool]:
    """The conversation the framework's id `base` names now: the first of
    `base`, `base~2`, ... that was not deleted (a deleted conversation's id
    stays a tombstone); and whether it exists."""
    key, generation = base, 1
    while True:
        try:
            await repository.get_conversation(key)
            return key, True
        except ConversationNotFound:
            return key, False
        except ConversationDeleted:
            generation += 1
            key = f"{base}~{generation}"
