"""The in-memory backend's reads of conversations: each a few lines over
the tables (`store.memory.tables`), answering as PostgreSQL's named
statements do (store.repository.port)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from decimal import Decimal

from store.assembler.prefix_cache import PrefixCache
from store.domain.codec import StoredWindow, message_text
from store.domain.context import AgentProfile, ContextSlots, default_profile, slots_from_values
from store.domain.errors import ConversationDeleted, ConversationNotFound
from store.domain.listing import ConversationCursor, ConversationQuery, Listed, json_contains
from store.domain.messages import MAIN_AGENT, ROLES, Role, StoredMessage
from store.domain.search import Candidate, SearchPage, SearchQuery, search_candidates
from store.domain.values import Batch, Conversation, ToolBlock
from store.memory.tables import (
    StreamRecord,
    Tables,
    event_record,
    stored_message,
)
from store.repository.port import (
    AssemblyInput,
    HistoryPage,
    WindowPage,
)


class MemoryReads:
    """The storage port's reads of one conversation, and listing and search."""

    _tables: Tables
    # The stable prefixes this storage's windows last had fingerprinted
    # (`store.assembler.prefix_cache`): one per storage, as the positions its
    # rows give are of its tables.
    prefix_cache: PrefixCache

    def _readable(self, cid: uuid.UUID, tenant: str) -> StreamRecord:
        row = self._tables.streams.get(cid)
        if row is None or row.tenant != tenant or row.version == 0:
            raise ConversationNotFound(cid)
        if row.deleted_at is not None:
            raise ConversationDeleted(cid)
        return row

    def _messages(self, cid: uuid.UUID, seqs: Iterable[int]) -> list[StoredMessage]:
        return [stored_message(self._tables, cid, s) for s in seqs]

    async def conversation(self, conversation_id: uuid.UUID, tenant: str) -> Conversation:
        row = self._readable(conversation_id, tenant)
        return Conversation(
            id=row.key,
            tenant=row.tenant,
            version=row.version,
            current_batch=row.batch_of(MAIN_AGENT),
            next_seq=row.next_seq,
            archived=row.archived_at is not None,
            started_at=row.created_at,
            metadata=row.metadata,
            updated_at=row.updated_at,
        )

    def _window_members(
        self,
        cid: uuid.UUID,
        row: StreamRecord,
        batch: int | None = None,
        agent_id: str | None = None,
        role: str | None = None,
    ) -> list[tuple[Decimal, int]]:
        """Batch `batch`'s window (of `agent_id`'s messages, if given), else
        `agent_id`'s current window, else every agent's current window:
        (sort key, seq) in window order."""
        views = self._tables.views[cid]
        messages = views.messages
        if batch is None and agent_id is None:
            numbers = {row.current_batch, *row.agent_batches.values()}
            found = sorted(
                (key, seq)
                for number in numbers
                for key, seq in views.members.get(number, ())
                if row.batch_of(messages[seq].agent_id) == number
            )
        else:
            number = row.batch_of(agent_id or "") if batch is None else batch
            found = [
                (key, seq)
                for key, seq in views.members.get(number, ())
                if agent_id is None or messages[seq].agent_id == agent_id
            ]
        return [(k, s) for k, s in found if role is None or messages[s].role == role]

    async def window(
        self, conversation_id: uuid.UUID, tenant: str, *, batch: int | None, agent_id: str | None
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        return self._messages(
            conversation_id, seqs_of(self._window_members(conversation_id, row, batch, agent_id))
        )

    async def recent_in_window(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        seqs = seqs_of(self._window_members(conversation_id, row, None, agent_id, role))
        return self._messages(conversation_id, seqs[max(len(seqs) - n, 0) :] if n else [])

    async def recent_in_history(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        seqs = [
            s
            for s in views.role_index[role]
            if agent_id is None or views.messages[s].agent_id == agent_id
        ]
        return self._messages(conversation_id, seqs[max(len(seqs) - n, 0) :] if n else [])

    async def role_range(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        seqs = self._tables.views[conversation_id].role_index[role][first - 1 : last]
        return self._messages(conversation_id, seqs)

    async def count_in_window(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        row = self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        roles = [
            views.messages[s].role for s in seqs_of(self._window_members(conversation_id, row))
        ]
        return {role: roles.count(role) for role in ROLES}

    async def count_in_history(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        self._readable(conversation_id, tenant)
        index = self._tables.views[conversation_id].role_index
        return {role: len(index[role]) for role in ROLES}

    async def history(
        self, conversation_id: uuid.UUID, tenant: str, page: HistoryPage
    ) -> list[StoredMessage]:
        row = self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        visible = (
            set(seqs_of(self._window_members(conversation_id, row))) if page.visible_only else None
        )
        seqs = sorted(
            s
            for s, m in views.messages.items()
            if (page.after_seq is None or s > page.after_seq)
            and (page.before_seq is None or s < page.before_seq)
            and (page.role is None or m.role == page.role)
            and (page.agent_id is None or m.agent_id == page.agent_id)
            and (page.kind is None or m.kind == page.kind)
            and (visible is None or s in visible)
        )
        if page.descending:
            seqs.reverse()
        return self._messages(conversation_id, seqs[: page.limit])

    async def window_page(
        self, conversation_id: uuid.UUID, tenant: str, page: WindowPage
    ) -> list[tuple[Decimal, StoredMessage]]:
        row = self._readable(conversation_id, tenant)
        found = [
            (key, seq)
            for key, seq in self._window_members(conversation_id, row, page.batch, page.agent_id)
            if page.after_key is None or key > page.after_key
        ][: page.limit]
        return [(key, stored_message(self._tables, conversation_id, seq)) for key, seq in found]

    async def list_conversations(self, tenant: str, query: ConversationQuery) -> list[Listed]:
        def wanted(row: StreamRecord) -> bool:
            return (
                row.tenant == tenant
                and row.version > 0
                and row.deleted_at is None
                and (query.metadata is None or json_contains(row.metadata, query.metadata))
                and (query.archived is None or (row.archived_at is not None) == query.archived)
                and (query.created_from is None or row.created_at >= query.created_from)
                and (query.created_to is None or row.created_at < query.created_to)
                and (query.updated_from is None or row.updated_at >= query.updated_from)
                and (query.updated_to is None or row.updated_at < query.updated_to)
            )

        newest = query.newest
        found = sorted(
            ((row.created_at, cid) for cid, row in self._tables.streams.items() if wanted(row)),
            reverse=newest,
        )
        if query.after is not None:
            after = (query.after.created_at, query.after.id)
            found = [k for k in found if (k < after if newest else k > after)]
        return [
            Listed(
                conversation=await self.conversation(cid, tenant),
                cursor=ConversationCursor(created_at=created_at, id=cid),
            )
            for created_at, cid in found[: query.limit + 1]  # one more: is there a next page?
        ]

    async def tool_blocks(
        self, conversation_id: uuid.UUID, tenant: str, *, pending_only: bool, agent_id: str | None
    ) -> list[ToolBlock]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        blocks = []
        for call_id, call in sorted(
            views.calls.items(), key=lambda item: (item[1].assistant_seq, item[0])
        ):
            if pending_only and call.result_seq is not None:
                continue
            if agent_id is not None and call.agent_id != agent_id:
                continue
            body = event_record(
                self._tables, conversation_id, views.messages[call.assistant_seq].event_version
            ).data["message"]
            arguments = next(
                c.get("arguments", {}) for c in body["tool_calls"] if c["id"] == call_id
            )
            blocks.append(
                ToolBlock(
                    call_id=call_id,
                    tool_name=call.tool_name,
                    arguments=arguments,
                    agent_id=call.agent_id,
                    assistant_seq=call.assistant_seq,
                    result_seq=call.result_seq,
                    status="pending" if call.result_seq is None else "complete",
                    is_error=call.is_error,
                )
            )
        return blocks

    async def batch_messages(
        self, conversation_id: uuid.UUID, tenant: str, batch: int
    ) -> list[StoredMessage]:
        self._readable(conversation_id, tenant)
        messages = self._tables.views[conversation_id].messages
        return self._messages(
            conversation_id, sorted(s for s, row in messages.items() if row.batch == batch)
        )

    async def batches(self, conversation_id: uuid.UUID, tenant: str) -> list[Batch]:
        self._readable(conversation_id, tenant)
        batches = self._tables.views[conversation_id].batches
        return [batches[n] for n in sorted(batches)]

    async def agent(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> tuple[AgentProfile, ContextSlots]:
        self._readable(conversation_id, tenant)
        views = self._tables.views[conversation_id]
        return (
            views.profiles.get(agent_id) or default_profile(agent_id),
            slots_from_values(views.slots.get(agent_id, {})),
        )

    async def assembly_input(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> AssemblyInput:
        row = self._readable(conversation_id, tenant)
        profile, slots = await self.agent(conversation_id, tenant, agent_id)
        seqs = seqs_of(self._window_members(conversation_id, row, None, agent_id))
        tables, views = self._tables, self._tables.views[conversation_id]
        # As the PostgreSQL storage reads them: each event's JSON, its
        # position and the edit's version (`StoredWindow`).
        rows = []
        for seq in seqs:
            appended = event_record(tables, conversation_id, views.messages[seq].event_version)
            edit = views.edits.get(seq)
            rows.append(
                (
                    appended.data,
                    event_record(tables, conversation_id, edit).data if edit else None,
                    appended.position,
                    edit or 0,
                )
            )
        return AssemblyInput(
            window=StoredWindow(rows), profile=profile, slots=slots, prefixes=self.prefix_cache
        )

    async def search_messages(self, tenant: str, query: SearchQuery) -> SearchPage:
        """A scan of the tenant's messages (store.domain.search: the same filters,
        whole-word matching for text mode)."""

        def candidates() -> Iterator[Candidate]:
            for cid, stream in self._tables.streams.items():
                if stream.tenant != tenant or stream.deleted_at is not None:
                    continue
                views = self._tables.views[cid]
                names: dict[int, set[str]] = defaultdict(set)
                for call in views.calls.values():
                    names[call.assistant_seq].add(call.tool_name)
                    if call.result_seq is not None:
                        names[call.result_seq].add(call.tool_name)
                for seq, row in views.messages.items():
                    event = event_record(self._tables, cid, row.event_version)
                    edit = views.edits.get(seq)
                    content = (
                        event_record(self._tables, cid, edit).data["content"] if edit else None
                    )
                    yield Candidate(
                        conversation=cid,
                        shown_id=stream.key,
                        metadata=stream.metadata,
                        seq=seq,
                        role=row.role,  # type: ignore[arg-type]
                        agent_id=row.agent_id,
                        kind=row.kind,
                        batch=row.batch,
                        recorded_at=event.recorded_at,
                        edited=edit is not None,
                        text=message_text(event.data["message"], content),
                        tool_names=frozenset(names.get(seq, ())),
                    )

        return search_candidates(query, candidates())


def seqs_of(members: list[tuple[Decimal, int]]) -> list[int]:
    """The seqs of a window's (sort key, seq) members, in window order."""
    return [seq for _, seq in members]
