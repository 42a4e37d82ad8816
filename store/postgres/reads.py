"""The reads of one conversation: its row, windows, a role's messages,
history pages, tool blocks, batches, an agent's profile and slots, the
assembler's input, and its events for an export.

Every read goes out in one sync: the conversation's row (does it exist,
for this tenant, not deleted) and the read itself, pipelined (`_read`). A
short read (the last N, a role's n-th..m-th, a page of the history)
carries that check in its own statement (`shared_sql.READABLE`) and goes
out alone; only an empty answer reads the row too (`_checked_messages`).
An agent's whole window goes out with the row too, read from the batch
this storage last found it in (`known_batches`), a guess its statement
checks: a window another process moved is read again where it went, one
round trip later (docs/storage.md, "Whole-window reads").

The statements: `window_sql` (windows), `history_sql` (a role's messages,
history pages), and the few below that read one table each.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from operator import itemgetter
from typing import Any, TypeVar

from psycopg import AsyncConnection

from store.assembler.prefix_cache import PrefixCache
from store.domain.codec import StoredWindow, collector_paused, decode_stored_rows
from store.domain.context import AgentProfile, ContextSlots, default_profile, slots_from_values
from store.domain.errors import ConversationDeleted, ConversationNotFound
from store.domain.feed import FeedEvent
from store.domain.messages import ROLES, Role, StoredMessage
from store.domain.values import Batch, Conversation, ToolBlock
from store.postgres import history_sql, window_sql
from store.postgres.feed import feed_event
from store.postgres.known_batches import KnownBatches
from store.postgres.pooled import Pool, Pooled, Reader, Row, errors_translated, pooled
from store.postgres.replicas import AGENT, ANALYST
from store.postgres.shared_sql import (
    CONVERSATION,
    MESSAGE_COLUMNS,
    NO_SEQ_ABOVE,
    PROBE_EVENTS,
)
from store.repository.port import AssemblyInput, HistoryPage, WindowPage

T = TypeVar("T")

# Each role's count is kept in the stream row (`role_counts`, in ROLES order).
COUNT_IN_HISTORY = "SELECT role_counts FROM conversations WHERE id = %(cid)s"

BATCH_MESSAGES = (
    f"SELECT {MESSAGE_COLUMNS} FROM messages AS m{PROBE_EVENTS}"
    " WHERE m.conversation_id = %(cid)s AND m.batch = %(batch)s ORDER BY m.seq"
)

# A call's arguments stay in the assistant message's event.
TOOL_BLOCKS = (
    "SELECT t.call_id, t.tool_name,"
    " (SELECT c -> 'arguments' FROM json_array_elements(e.data -> 'message' -> 'tool_calls') AS c"
    "  WHERE c ->> 'id' = t.call_id LIMIT 1),"
    " t.agent_id, t.assistant_seq, t.result_seq, t.status, t.is_error"
    " FROM tool_calls AS t"
    " JOIN messages AS m ON m.conversation_id = t.conversation_id AND m.seq = t.assistant_seq"
    " JOIN events AS e ON e.conversation_id = m.conversation_id AND e.version = m.event_version"
    " WHERE t.conversation_id = %(cid)s"
    " AND (NOT %(pending)s OR t.status = 'pending')"
    " AND (%(agent)s::text IS NULL OR t.agent_id = %(agent)s)"
    " ORDER BY t.assistant_seq, t.call_id"
)

BATCHES = (
    "SELECT batch, boundary, summary_seq, retained, operation, parameters, started_at, agent_id"
    " FROM batches WHERE conversation_id = %(cid)s ORDER BY batch"
)

PROFILE = (
    "SELECT is_sub_agent, system_prompt, role_definition FROM agent_profiles"
    " WHERE conversation_id = %(cid)s AND agent_id = %(agent)s"
)

SLOTS = (
    "SELECT slot, value FROM context_slots WHERE conversation_id = %(cid)s AND agent_id = %(agent)s"
)

# A conversation's events, as a page of the feed has them (`feed.feed_event`).
# Versions of one conversation commit in order (its stream row lock), so a
# keyset by version never skips one: no feed horizon needed here.
CONVERSATION_EVENTS = (
    "SELECT transaction_id, position, (SELECT key FROM conversations WHERE id = %(cid)s),"
    " version, type, data, recorded_at FROM events"
    " WHERE conversation_id = %(cid)s AND version > %(after)s ORDER BY version LIMIT %(limit)s"
)


def check_readable(conversation_id: uuid.UUID, tenant: str, row: Row | None) -> Row:
    """The conversation's row (`CONVERSATION`, or any row that starts with
    its tenant, version and deleted flag), if `tenant` may read it."""
    if row is None or row[0] != tenant or row[1] == 0:
        # Another tenant's conversation looks exactly like a missing one.
        raise ConversationNotFound(conversation_id)
    if row[2]:
        raise ConversationDeleted(conversation_id)
    return row


def conversation_from_row(row: Sequence[Any]) -> Conversation:
    """A conversation from its key, tenant, version, the main agent's
    batch, next seq, archived flag, times and metadata, in that order (the
    first columns of `listing.LIST_COLUMNS`)."""
    key, tenant, version, batch, next_seq, archived, created_at, metadata, updated_at = row[:9]
    return Conversation(
        id=key,
        tenant=tenant,
        version=version,
        current_batch=batch,
        next_seq=next_seq,
        archived=archived,
        started_at=created_at,
        metadata=metadata,
        updated_at=updated_at,
    )


def profile_from_rows(agent_id: str, rows: list[Row]) -> AgentProfile:
    """The agent's profile from `PROFILE`'s rows (none: the default one)."""
    if not rows:
        return default_profile(agent_id)
    is_sub_agent, system_prompt, role_definition = rows[0]
    return AgentProfile(
        agent_id=agent_id,
        is_sub_agent=is_sub_agent,
        system_prompt=system_prompt,
        role_definition=role_definition,
    )


def in_window_order(rows: list[Row]) -> list[Row]:
    """A whole window's rows, which the server sends in no order, sorted by
    their window key: the last two columns, the message's seq and, where it
    differs, its sort key (`window_sql._one_of` says why). Python compares
    an int with a Decimal exactly."""
    inserted = list(map(itemgetter(-1), rows))
    if inserted.count(None) == len(inserted):  # the usual window: keys are seqs
        rows.sort(key=itemgetter(-2))
    else:
        rows.sort(key=_window_key)
    return rows


def _agent_head_at(rows: list[Row]) -> int:
    """Where `window_sql.ASSEMBLY`'s row of the agent's profile and slots is
    among its rows (last, as the server sends a UNION ALL's branches in
    order; looked for from the end, not assumed)."""
    for at in range(len(rows) - 1, -1, -1):
        if rows[at][-2] == window_sql.HEAD_SEQ:
            return at
    raise AssertionError("the assembly statement answered no row of the agent's profile")


def _window_key(row: Row) -> Any:
    inserted = row[-1]
    return row[-2] if inserted is None else inserted


class ConversationReads(Pooled):
    """The storage port's reads of one conversation (`storage.PostgresStorage`)."""

    _known_batches: KnownBatches | None = None
    _prefix_cache: PrefixCache | None = None

    @property
    def known_batches(self) -> KnownBatches:
        """Where this storage last found each agent's window (`known_batches`)."""
        if self._known_batches is None:
            self._known_batches = KnownBatches()
        return self._known_batches

    @property
    def prefix_cache(self) -> PrefixCache:
        """The stable prefixes this storage's windows last had fingerprinted
        (`store.assembler.prefix_cache`: one per storage, as the positions
        its rows give are of its database)."""
        if self._prefix_cache is None:
            self._prefix_cache = PrefixCache()
        return self._prefix_cache

    async def _read(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        *statements: tuple[str, Mapping[str, Any]],
        reader: Reader = AGENT,
    ) -> tuple[Row, list[list[Row]]]:
        """The conversation's row (checked) and each statement's rows, one sync."""
        return await self._read_into(
            conversation_id, tenant, statements, lambda row, found: found, reader=reader
        )

    async def _read_into(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        statements: Sequence[tuple[str, Mapping[str, Any]]],
        decode: Callable[[Row, list[list[Row]]], T],
        *,
        window: tuple[Mapping[bool, str], Mapping[str, Any]] | None = None,
        reader: Reader = AGENT,
    ) -> tuple[Row, T]:
        """`_read`, the rows made into values by `decode(row, found)`: the
        collector is paused from when they are here until they are values,
        and they are gone before it runs again, so its next pass never walks
        them (store.domain.codec, `collector_paused`). The pause starts after
        the pipeline's sync, so it spans no query and no wait for a connection,
        only the connection's return (its commit); the decoding runs after
        that return, not holding a connection of the pool.

        `window`: an agent's whole window read last (`window_sql.AGENT_WINDOW`
        or another such pair, its parameters with `agent`), in the same
        sync, from the batch this storage last saw it in (`KnownBatches`;
        batch 1 if none). A window that has moved on since (another
        process's batch operation) is read again from the batch it is in:
        one round trip more, on this read only.

        `reader`: whose read it is, which decides the server that answers
        it (`replicas`): an agent's sees its own writes."""

        async def read(pool: Pool) -> tuple[Row, T]:
            with contextlib.ExitStack() as pause:
                async with pooled(pool) as conn:
                    async with conn.pipeline():
                        first = await conn.execute(CONVERSATION, {"cid": conversation_id})
                        cursors = [await conn.execute(s, p) for s, p in statements]
                        if window is not None:
                            statements_by_first, params = window
                            params = {**params, "tenant": tenant}
                            batch = self.known_batches.batch(conversation_id, params["agent"])
                            cursors.append(
                                await conn.execute(
                                    statements_by_first[batch == 1], {**params, "batch": batch}
                                )
                            )
                    # Leaving the pipeline synced it: every answer is here.
                    row = check_readable(conversation_id, tenant, await first.fetchone())
                    pause.enter_context(collector_paused())
                    found = [await c.fetchall() for c in cursors]
                    if window is not None:
                        found[-1] = await self._window_again(
                            conn, conversation_id, tenant, found[-1], batch, window[0], params
                        )
                values = decode(row, found)
                del found
            return row, values

        with errors_translated(conversation_id):
            return await self._routed(reader, conversation_id, read)

    async def _window_again(
        self,
        conn: AsyncConnection[Any],
        conversation_id: uuid.UUID,
        tenant: str,
        rows: list[Row],
        batch: int,
        statements_by_first: Mapping[bool, str],
        params: Mapping[str, Any],
    ) -> list[Row]:
        """The window's `rows`, read from `batch`; if the window was not
        there (`window_sql.moved_to`), read again from where it is, as
        often as it moves meanwhile. Rare (another process moved it), so
        the collector's pause is left as it is. Remembers where it was
        found."""
        moved, there = window_sql.moved_to(rows)
        while moved:
            if there is None:  # not readable now: the row says why, or where
                cursor = await conn.execute(window_sql.CONVERSATION_OF_AGENT, params)
                there = int(check_readable(conversation_id, tenant, await cursor.fetchone())[-1])
            batch = there
            cursor = await conn.execute(statements_by_first[batch == 1], {**params, "batch": batch})
            rows = await cursor.fetchall()
            moved, there = window_sql.moved_to(rows)
        self.known_batches.found(conversation_id, params["agent"], batch)
        return rows

    async def _messages(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        statement: str,
        *,
        reader: Reader = AGENT,
        **params: Any,
    ) -> list[StoredMessage]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (statement, {"cid": conversation_id, **params}), reader=reader
        )
        return decode_stored_rows(rows)

    async def _checked_messages(
        self,
        conversation_id: uuid.UUID,
        tenant: str,
        statement: str,
        *,
        reader: Reader = AGENT,
        **params: Any,
    ) -> list[StoredMessage]:
        """Messages from a statement that checks the tenant's right to read
        itself (`shared_sql.READABLE`): one statement, without the pipeline
        `_read` needs for two (docs/storage.md, "Short reads"). Only an empty
        answer reads the conversation's row, to tell a missing or deleted
        conversation (an error) from an empty page."""

        async def read(pool: Pool) -> list[Row]:
            async with pooled(pool) as conn:
                # Rows in binary: numbers, times and flags without parsing
                # their text (a message's body, `json`, is its text either
                # way). Every statement here returns
                # `shared_sql.MESSAGE_COLUMNS` and numbers: a column of one
                # of our enum types would come back as bytes.
                cursor = conn.cursor(binary=True)
                await cursor.execute(
                    statement, {"cid": conversation_id, "tenant": tenant, **params}
                )
                with collector_paused():
                    return await cursor.fetchall()

        with errors_translated(conversation_id):
            rows = await self._routed(reader, conversation_id, read)
        if not rows:
            await self._read(conversation_id, tenant, reader=reader)
            return []
        return decode_stored_rows(rows)

    async def conversation(self, conversation_id: uuid.UUID, tenant: str) -> Conversation:
        row, _ = await self._read(conversation_id, tenant)
        # CONVERSATION's columns in the listing's order: its key (last), the
        # tenant it was checked for, and the rest but the deleted flag.
        return conversation_from_row((row[9], tenant, row[1], *row[3:9]))

    async def window(
        self, conversation_id: uuid.UUID, tenant: str, *, batch: int | None, agent_id: str | None
    ) -> list[StoredMessage]:
        def decode(_: Row, found: list[list[Row]]) -> list[StoredMessage]:
            return decode_stored_rows(in_window_order(found[0]))

        if batch is None and agent_id is not None:
            params = {"cid": conversation_id, "agent": agent_id}
            _, messages = await self._read_into(
                conversation_id, tenant, [], decode, window=(window_sql.AGENT_WINDOW, params)
            )
            return messages
        statement = window_sql.window(batch=batch is not None, agent=agent_id is not None)
        params = {"cid": conversation_id, "batch": batch, "agent": agent_id}
        _, messages = await self._read_into(conversation_id, tenant, [(statement, params)], decode)
        return messages

    async def recent_in_window(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        return await self._checked_messages(
            conversation_id,
            tenant,
            window_sql.recent_in_window(agent=agent_id is not None),
            role=role,
            n=n,
            agent=agent_id,
        )

    async def recent_in_history(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, n: int, agent_id: str | None
    ) -> list[StoredMessage]:
        ordinals: dict[str, Any] = history_sql.ALL_ORDINALS
        return await self._checked_messages(
            conversation_id,
            tenant,
            history_sql.recent_in_history(role),
            n=n,
            agent=agent_id,
            **ordinals,
        )

    async def role_range(
        self, conversation_id: uuid.UUID, tenant: str, role: Role, first: int, last: int
    ) -> list[StoredMessage]:
        return await self._checked_messages(
            conversation_id, tenant, history_sql.role_range(role), first=first, last=last
        )

    async def count_in_window(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (window_sql.COUNT_IN_WINDOW, {"cid": conversation_id})
        )
        found = {r[0]: int(r[1]) for r in rows}
        return {role: found.get(role, 0) for role in ROLES}

    async def count_in_history(self, conversation_id: uuid.UUID, tenant: str) -> dict[Role, int]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (COUNT_IN_HISTORY, {"cid": conversation_id})
        )
        return {role: int(n) for role, n in zip(ROLES, rows[0][0], strict=True)}

    async def history(
        self, conversation_id: uuid.UUID, tenant: str, page: HistoryPage
    ) -> list[StoredMessage]:
        statement = history_sql.history(
            descending=page.descending,
            visible=page.visible_only,
            role=page.role,
            agent=page.agent_id is not None,
            kind=page.kind is not None,
        )
        return await self._checked_messages(
            conversation_id,
            tenant,
            statement,
            reader=ANALYST,
            after=-1 if page.after_seq is None else page.after_seq,
            before=NO_SEQ_ABOVE if page.before_seq is None else page.before_seq,
            limit=page.limit,
            agent=page.agent_id,
            kind=page.kind,
        )

    async def window_page(
        self, conversation_id: uuid.UUID, tenant: str, page: WindowPage
    ) -> list[tuple[Decimal, StoredMessage]]:
        params = {
            "cid": conversation_id,
            "batch": page.batch,
            "agent": page.agent_id,
            "after": Decimal(-1) if page.after_key is None else page.after_key,
            "limit": page.limit,
        }
        statement = window_sql.window(
            batch=page.batch is not None, agent=page.agent_id is not None, page=True
        )
        _, (rows,) = await self._read(conversation_id, tenant, (statement, params))
        return list(zip((Decimal(r[8]) for r in rows), decode_stored_rows(rows), strict=True))

    async def tool_blocks(
        self, conversation_id: uuid.UUID, tenant: str, *, pending_only: bool, agent_id: str | None
    ) -> list[ToolBlock]:
        params = {"cid": conversation_id, "pending": pending_only, "agent": agent_id}
        _, (rows,) = await self._read(conversation_id, tenant, (TOOL_BLOCKS, params))
        return [
            ToolBlock(
                call_id=call_id,
                tool_name=name,
                arguments=arguments or {},
                agent_id=agent,
                assistant_seq=assistant_seq,
                result_seq=result_seq,
                status=status,
                is_error=is_error,
            )
            for call_id, name, arguments, agent, assistant_seq, result_seq, status, is_error in rows
        ]

    async def batch_messages(
        self, conversation_id: uuid.UUID, tenant: str, batch: int
    ) -> list[StoredMessage]:
        return await self._messages(
            conversation_id, tenant, BATCH_MESSAGES, reader=ANALYST, batch=batch
        )

    async def batches(self, conversation_id: uuid.UUID, tenant: str) -> list[Batch]:
        _, (rows,) = await self._read(
            conversation_id, tenant, (BATCHES, {"cid": conversation_id}), reader=ANALYST
        )
        return [
            Batch(
                number=number,
                boundary=Decimal(boundary),
                summary_seq=summary_seq,
                retained=tuple(retained),
                operation=operation,
                parameters=parameters,
                started_at=started_at,
                agent_id=agent_id,
            )
            for (
                number,
                boundary,
                summary_seq,
                retained,
                operation,
                parameters,
                started_at,
                agent_id,
            ) in rows
        ]

    async def agent(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> tuple[AgentProfile, ContextSlots]:
        params = {"cid": conversation_id, "agent": agent_id}
        _, (profile, slots) = await self._read(
            conversation_id, tenant, (PROFILE, params), (SLOTS, params)
        )
        return profile_from_rows(agent_id, profile), slots_from_values(dict(slots))

    async def assembly_input(
        self, conversation_id: uuid.UUID, tenant: str, agent_id: str
    ) -> AssemblyInput:
        """The agent's window and what else the assembler reads, in one
        statement (`window_sql.ASSEMBLY`): the window's rows, sorted (the
        assembler renders a plain window from their JSON, decoding none:
        store.assembler.plain), and the row of the agent's profile and
        slots. Whether the conversation may be read is the window's gate:
        if not, the window's row says so and `_window_again` raises why. The
        collector is paused from the rows to the window, as `_read_into`
        pauses it."""
        params = {"cid": conversation_id, "agent": agent_id, "tenant": tenant}

        async def read(pool: Pool) -> tuple[Row, StoredWindow]:
            with contextlib.ExitStack() as pause:
                async with pooled(pool) as conn:
                    batch = self.known_batches.batch(conversation_id, agent_id)
                    cursor = await conn.execute(
                        window_sql.ASSEMBLY[batch == 1], {**params, "batch": batch}
                    )
                    pause.enter_context(collector_paused())
                    rows = await cursor.fetchall()
                    head = rows.pop(_agent_head_at(rows))
                    again = window_sql.ASSEMBLY_WINDOW  # the profile is read: the window only
                    rows = await self._window_again(
                        conn, conversation_id, tenant, rows, batch, again, params
                    )
                window = StoredWindow(in_window_order(rows))
                del rows
            return head, window

        with errors_translated(conversation_id):
            (profile, slots, *_), window = await self._routed(AGENT, conversation_id, read)
        return AssemblyInput(
            window=window,
            profile=profile_from_rows(agent_id, [] if profile is None else [tuple(profile)]),
            slots=slots_from_values(slots or {}),
            prefixes=self.prefix_cache,
        )

    # --- export (store.repository.export) ---

    async def conversation_events(
        self, conversation_id: uuid.UUID, tenant: str, after_version: int, limit: int
    ) -> list[FeedEvent]:
        params = {"cid": conversation_id, "after": after_version, "limit": limit}
        _, (rows,) = await self._read(
            conversation_id, tenant, (CONVERSATION_EVENTS, params), reader=ANALYST
        )
        return [feed_event(row) for row in rows]
