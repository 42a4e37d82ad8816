"""Optimistic appends to different conversations, written together.

An append decided on what the storage remembers of its conversation (an
optimistic append: docs/storage.md, "Appends in one round trip") is one
statement in autocommit. Most of what that statement costs the server and
the driver is per statement and per transaction — parse-free execution of
a plan of seven parts, a commit, a WAL flush, a network exchange — not per
row. So when appends to several conversations are ready at once, they go
out as one statement (`append_sql.append_cte(guarded=True)` takes any
number of conversations, each row naming its own), one commit for all:
with many writers this is what lets throughput grow with them instead of
stalling at the server's per-statement cost (docs/storage.md, "Writers
together").

A lone writer waits for nothing: an append that finds a free slot (fewer
than `writers` statements in flight) and nobody waiting goes out at once,
alone. Appends that arrive while every slot is busy are gathered, and a
freed slot takes an even share of them (`GroupCommit._take` says why).
Each append still commits or fails by its own guard:

- a conversation whose row had moved on (another write came between) or
  is locked by another transaction (its lock is skipped, never waited for:
  one busy conversation does not hold up the rest, and two such statements
  cannot deadlock) is simply not written, and its append is decided again
  the way that takes the lock (`StaleHead`);
- a statement the server refused (a constraint, say: a tool call id the
  memory took to be new) wrote nothing, so each of its appends is sent again alone,
  and only the one at fault fails;
- a statement whose outcome is unknown (the connection lost) fails every
  append in it, as it would have failed each alone.

At most one append per conversation is in flight at a time: a second one
waits for the statement carrying the first.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from store.postgres.append_sql import append_cte, rows_json
from store.postgres.pooled import Pool, pooled
from store.postgres.replicas import COMMIT_LSN

# Statements in flight at once. Two keep both sides busy — the server
# executing one while this process builds the next and reads the last's
# answer; more only split the same appends into smaller statements.
WRITERS = 2
# Appends in one statement, at most: its rows are held in memory twice
# (the parameters, the server's plan), and a failure sends each again alone.
MOST = 128


@dataclass(frozen=True, eq=False, kw_only=True)
class GuardedAppend:
    """One optimistic append as the guarded statement takes it: its head's
    row (`append_sql._HEAD_COLUMNS`: the version it was decided on, the new head,
    its idempotency key and client ids if any) and the rows of each table,
    each naming the conversation (`cid`)."""

    conversation_id: uuid.UUID
    head: dict[str, Any]
    events: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    answers: list[dict[str, Any]]
    request: dict[str, Any] | None


def statement(appends: Sequence[GuardedAppend]) -> tuple[str, dict[str, Any]]:
    """The one statement that writes `appends` (different conversations)."""
    heads, events, messages, calls, answers, requests = [], [], [], [], [], []
    for append in appends:
        heads.append(append.head)
        events += append.events
        messages += append.messages
        calls += append.calls
        answers += append.answers
        if append.request is not None:
            requests.append(append.request)
    lone = len(heads) == 1
    text = append_cte(
        with_messages=bool(messages),
        calls=bool(calls),
        answers=bool(answers),
        request=bool(requests),
        guarded=True,
        client_ids=any(head["client_ids"] for head in heads),
        lone=lone,
    )
    if lone:
        # Its head goes as parameters (`append_cte(lone=True)`); the role
        # counts as an array's text, which the server reads: the driver's
        # adaptation of a list (finding the elements' type) cost more.
        params = dict(heads[0])
        params["role_counts"] = "{" + ",".join(map(str, params["role_counts"])) + "}"
    else:
        params = {"heads": rows_json(heads)}
    params["events"] = rows_json(events)
    for name, rows in (
        ("messages", messages),
        ("calls", calls),
        ("answers", answers),
        ("requests", requests),
    ):
        if rows:
            params[name] = rows_json(rows)
    return text, params


def _nothing_written(error: BaseException) -> bool:
    """Did the server refuse the statement? Then, in autocommit, it wrote
    nothing. (No SQLSTATE, or a connection's: the outcome is unknown.)"""
    return (
        isinstance(error, psycopg.Error)
        and error.sqlstate is not None
        and not error.sqlstate.startswith("08")
    )


_Waiting = tuple[GuardedAppend, "asyncio.Future[datetime | None]"]


class GroupCommit:
    """Writes optimistic appends, those waiting together (module docstring)."""

    def __init__(
        self,
        pool: Pool,
        *,
        writers: int = WRITERS,
        most: int = MOST,
        on_commit: Callable[[Iterable[uuid.UUID], int], None] | None = None,
    ) -> None:
        self._pool = pool
        # Told each statement's conversations and its commit's LSN, read in
        # the same round trip (a storage with replicas: `replicas.ReplicaSet`).
        self._on_commit = on_commit
        self._writers = writers
        self._most = most
        self._waiting: list[_Waiting] = []
        self._in_flight: set[uuid.UUID] = set()  # conversations being written
        self._sending = 0  # statements in flight
        self._tasks: set[asyncio.Task[None]] = set()

    async def write(self, append: GuardedAppend) -> datetime | None:
        """Write `append`: its transaction's time, or None when its
        conversation had moved on or was locked (nothing written).

        Cancelled while it waits, it is not sent; cancelled once sent, it
        may still be written (as a cancelled statement may commit)."""
        cid = append.conversation_id
        if self._sending < self._writers and not self._waiting and cid not in self._in_flight:
            # A free slot and nobody waiting: sent at once, from this task
            # (what a lone writer does every time; no task, no future).
            self._sending += 1
            self._in_flight.add(cid)
            try:
                return (await self._execute([append])).get(cid)
            finally:
                self._in_flight.discard(cid)
                self._sending -= 1
                self._send_waiting()
        future: asyncio.Future[datetime | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((append, future))
        self._send_waiting()
        return await future

    async def close(self) -> None:
        """Wait for the statements in flight (before the pool closes)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _send_waiting(self) -> None:
        while self._sending < self._writers:
            group = self._take()
            if not group:
                return
            self._sending += 1
            task = asyncio.create_task(self._write_group(group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self) -> list[_Waiting]:
        """The next statement's appends: those waiting, oldest first, one
        per conversation, none of a conversation in flight."""
        group: list[_Waiting] = []
        left: list[_Waiting] = []
        taken: set[uuid.UUID] = set()
        # An even share of the appends waiting and in flight: the slots'
        # statements stay about the same size, so the server executes one
        # while this process answers and decides another's. (Taking all
        # that wait, a slot freed by a small statement kept carrying small
        # ones beside one of everybody else: the two sides took turns.)
        share = -(-(len(self._waiting) + len(self._in_flight)) // self._writers)
        most = min(self._most, max(1, share))
        for waiting in self._waiting:
            append, future = waiting
            if future.done():  # its writer was cancelled: not sent
                continue
            cid = append.conversation_id
            if cid in self._in_flight or cid in taken or len(group) >= most:
                left.append(waiting)
            else:
                group.append(waiting)
                taken.add(cid)
        self._waiting = left
        self._in_flight |= taken
        return group

    async def _write_group(self, group: list[_Waiting]) -> None:
        try:
            await self._send(group)
        finally:
            self._in_flight.difference_update(append.conversation_id for append, _ in group)
            # The slot is freed after the writers this statement answered
            # have run (their wake-ups were queued first): each typically
            # appends again at once, and their appends then go out
            # together, not the first alone and the rest behind it.
            asyncio.get_running_loop().call_soon(self._free_slot)

    def _free_slot(self) -> None:
        self._sending -= 1
        self._send_waiting()

    async def _send(self, group: list[_Waiting]) -> None:
        try:
            written = await self._execute([append for append, _ in group])
        except Exception as error:
            if len(group) > 1 and _nothing_written(error):
                for waiting in group:
                    await self._send([waiting])
                return
            for _, future in group:
                if not future.done():
                    future.set_exception(error)
            return
        except BaseException:
            for _, future in group:
                future.cancel()
            raise
        for append, future in group:
            if not future.done():
                future.set_result(written.get(append.conversation_id))

    async def _execute(self, appends: list[GuardedAppend]) -> dict[uuid.UUID, datetime]:
        text, params = statement(appends)
        async with pooled(self._pool) as conn:
            if self._on_commit is None:
                cursor = await conn.execute(text, params)
                rows = await cursor.fetchall()
            else:
                # The commit's position, asked in the same sync (autocommit:
                # the statement has committed when the next one runs).
                async with conn.pipeline():
                    cursor = await conn.execute(text, params)
                    position = await conn.execute(COMMIT_LSN)
                rows = await cursor.fetchall()
                row = await position.fetchone()
                assert row is not None
                if rows:
                    self._on_commit((r[0] for r in rows), row[0])
        return {row[0]: row[1] for row in rows}
