"""The repository's reads of one conversation: its window, its messages by
role, by seq or a page at a time, its tool blocks, batches and agents, the
payload of an agent's next call; and the tenant's search.

Reads check what they are asked (limits, scopes, roles, kinds) and hand the
storage a typed page (`store.repository.port`); nothing here writes.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from store.domain.codec import collector_paused
from store.domain.context import AgentProfile, ContextSlots
from store.domain.conversation_keys import addressed
from store.domain.errors import InvalidOperation
from store.domain.listing import (
    MAX_READ_LIMIT,
    MessagePage,
    WindowSlice,
    decode_window_cursor,
    encode_window_cursor,
)
from store.domain.messages import MAIN_AGENT, ROLES, MessageKind, Role, StoredMessage
from store.domain.search import SearchPage, SearchQuery
from store.domain.values import Batch, Scope, ToolBlock
from store.repository.port import HistoryPage, WindowPage
from store.repository.write_path import RepositoryPart

if TYPE_CHECKING:
    from store.assembler import Assembly


def _role(role: str) -> Role:
    if role not in ROLES:
        raise InvalidOperation(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    return role


class Reads(RepositoryPart):
    """Reads of a conversation, and the tenant's search."""

    @addressed
    async def visible_window(
        self, conversation_id: uuid.UUID, *, batch: int | None = None, agent_id: str | None = None
    ) -> list[StoredMessage]:
        return await self.storage.window(
            conversation_id, self.tenant, batch=batch, agent_id=agent_id
        )

    @addressed
    async def recent_by_role(
        self,
        conversation_id: uuid.UUID,
        role: Role,
        n: int,
        *,
        scope: Scope = "visible",
        agent_id: str | None = None,
    ) -> list[StoredMessage]:
        role = _role(role)
        if n < 0:
            raise InvalidOperation(f"recent_by_role needs n >= 0, got {n}")
        if n > MAX_READ_LIMIT:
            raise InvalidOperation(f"recent_by_role reads at most {MAX_READ_LIMIT}, got n={n}")
        if scope == "history":
            return await self.storage.recent_in_history(
                conversation_id, self.tenant, role, n, agent_id
            )
        if scope != "visible":
            raise InvalidOperation(f"unknown scope {scope!r}; scopes are visible, history")
        return await self.storage.recent_in_window(conversation_id, self.tenant, role, n, agent_id)

    @addressed
    async def role_range(
        self, conversation_id: uuid.UUID, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        role = _role(role)
        if first < 1 or last < first:
            raise InvalidOperation(f"role_range needs 1 <= first <= last, got {first}..{last}")
        if last - first + 1 > MAX_READ_LIMIT:
            raise InvalidOperation(f"role_range reads at most {MAX_READ_LIMIT} messages at once")
        return await self.storage.role_range(conversation_id, self.tenant, role, first, last)

    @addressed
    async def count_by_role(
        self, conversation_id: uuid.UUID, *, scope: Scope = "visible"
    ) -> dict[Role, int]:
        if scope == "history":
            return await self.storage.count_in_history(conversation_id, self.tenant)
        if scope != "visible":
            raise InvalidOperation(f"unknown scope {scope!r}; scopes are visible, history")
        return await self.storage.count_in_window(conversation_id, self.tenant)

    @addressed
    async def read_messages(
        self,
        conversation_id: uuid.UUID,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
        role: Role | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        scope: Scope = "history",
    ) -> list[StoredMessage]:
        """A keyset page of the whole history (or, `scope="visible"`, of the
        current window), by seq, optionally of one role, agent or kind:
        `order="desc", limit=N` is "the last N messages", O(N) at any
        history length."""
        page = self._history_page(after_seq, before_seq, limit, order, role, agent_id, kind, scope)
        return await self.storage.history(conversation_id, self.tenant, page)

    @addressed
    async def page_messages(
        self,
        conversation_id: uuid.UUID,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 100,
        order: Literal["asc", "desc"] = "asc",
        role: Role | None = None,
        agent_id: str | None = None,
        kind: str | None = None,
        scope: Scope = "history",
    ) -> MessagePage:
        """`read_messages`, with where the next page starts (null when this
        page is the last)."""
        page = self._history_page(after_seq, before_seq, limit, order, role, agent_id, kind, scope)
        found = await self.storage.history(
            conversation_id, self.tenant, replace(page, limit=limit + 1)
        )
        items = found[:limit]
        more = len(found) > limit
        last = items[-1].seq if more else None
        if order == "desc":
            return MessagePage(items=tuple(items), next_before_seq=last)
        return MessagePage(items=tuple(items), next_after_seq=last)

    @staticmethod
    def _history_page(
        after_seq: int | None,
        before_seq: int | None,
        limit: int,
        order: str,
        role: str | None,
        agent_id: str | None,
        kind: str | None,
        scope: str,
    ) -> HistoryPage:
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidOperation(f"limit must be 1..{MAX_READ_LIMIT}, got {limit}")
        if order not in ("asc", "desc"):
            raise InvalidOperation(f"order must be 'asc' or 'desc', got {order!r}")
        if scope not in ("visible", "history"):
            raise InvalidOperation(f"unknown scope {scope!r}; scopes are visible, history")
        if kind is not None and kind not in {k.value for k in MessageKind}:
            kinds = ", ".join(k.value for k in MessageKind)
            raise InvalidOperation(f"unknown kind {kind!r}; kinds are {kinds}")
        return HistoryPage(
            after_seq=after_seq,
            before_seq=before_seq,
            limit=limit,
            descending=order == "desc",
            role=None if role is None else _role(role),
            agent_id=agent_id,
            kind=kind,
            visible_only=scope == "visible",
        )

    @addressed
    async def read_window(
        self,
        conversation_id: uuid.UUID,
        *,
        batch: int | None = None,
        agent_id: str | None = None,
        cursor: str | None = None,
        limit: int = MAX_READ_LIMIT,
    ) -> WindowSlice:
        """A page of a batch's visible window (default: the current one), in
        window order; `cursor` is a page's `next_cursor`. (`visible_window`
        reads it whole, for the assembler.)"""
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidOperation(f"limit must be 1..{MAX_READ_LIMIT}, got {limit}")
        page = WindowPage(
            batch=batch,
            agent_id=agent_id,
            after_key=None if cursor is None else decode_window_cursor(cursor),
            limit=limit + 1,
        )
        found = await self.storage.window_page(conversation_id, self.tenant, page)
        items = found[:limit]
        next_cursor = encode_window_cursor(items[-1][0]) if len(found) > limit else None
        return WindowSlice(items=tuple(m for _, m in items), next_cursor=next_cursor)

    @addressed
    async def tool_blocks(
        self, conversation_id: uuid.UUID, *, pending_only: bool = False, agent_id: str | None = None
    ) -> list[ToolBlock]:
        return await self.storage.tool_blocks(
            conversation_id, self.tenant, pending_only=pending_only, agent_id=agent_id
        )

    @addressed
    async def batch_messages(self, conversation_id: uuid.UUID, batch: int) -> list[StoredMessage]:
        """The messages that arrived while batch `batch` was current."""
        return await self.storage.batch_messages(conversation_id, self.tenant, batch)

    @addressed
    async def batches(self, conversation_id: uuid.UUID) -> list[Batch]:
        return await self.storage.batches(conversation_id, self.tenant)

    @addressed
    async def context_slots(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> ContextSlots:
        _, slots = await self.storage.agent(conversation_id, self.tenant, agent_id)
        return slots

    @addressed
    async def agent_profile(
        self, conversation_id: uuid.UUID, agent_id: str = MAIN_AGENT
    ) -> AgentProfile:
        profile, _ = await self.storage.agent(conversation_id, self.tenant, agent_id)
        return profile

    async def search_messages(self, query: SearchQuery) -> SearchPage:
        """A page of this tenant's messages matching `query`, newest first
        (store.domain.search, docs/search.md): every batch's messages, visible or
        not; an edited message by its current content. A bad cursor is
        InvalidOperation; another tenant's conversation is never searched."""
        query.after()  # a cursor this API did not return is refused here
        return await self.storage.search_messages(self.tenant, query)

    @addressed
    async def assemble(
        self,
        conversation_id: uuid.UUID,
        *,
        agent_id: str = MAIN_AGENT,
        format: str = "openai-chat",
        options: Any = None,
    ) -> Assembly:
        """The payload of this agent's next LLM call, from its visible window
        and its context slots as they are now."""
        from store.assembler import assemble_stored
        from store.assembler.fingerprint import digest_rows

        found = await self.storage.assembly_input(conversation_id, self.tenant, agent_id)
        prefix_digest = (
            digest_rows
            if found.prefixes is None
            else functools.partial(found.prefixes.digest, (conversation_id, agent_id))
        )
        with collector_paused():  # a payload of thousands of small dicts: see store.domain.codec
            return assemble_stored(
                found.window,
                profile=found.profile,
                slots=found.slots,
                format=format,
                options=options,
                prefix_digest=prefix_digest,
            )
