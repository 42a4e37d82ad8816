"""What the LangGraph saver keeps of a thread in memory (`Thread`): its
conversation and log, and the message lists of the checkpoints its runs
read or wrote, as entries (message, seq, LangChain id); and the small
helpers on message lists and seq runs the saver's reads and writes share.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import BaseMessage, RemoveMessage

from store.adapters._conversation import Conversation
from store.adapters._graph_log import Record, ThreadLog, lane
from store.adapters.langchain import _orphan, from_langchain, to_langchain
from store.repository import ConversationRepository

# (message, its seq, its LangChain id when it was stored)
Entry = tuple[BaseMessage, int, str | None]

MAX_LISTS = 64  # message lists a thread keeps in memory (views and stored)


def message_lane(ns: str) -> str:
    """The agent whose messages namespace `ns`'s are."""
    return "main" if not ns else lane("graph", ns)


def seq_runs(seqs: Sequence[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for seq in seqs:
        if runs and runs[-1][1] + 1 == seq:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return runs


def resolve_writes(entry: dict[str, Any], seqs: Sequence[int]) -> None:
    """`entry`'s messages named by their place among those appended with it
    (`-1 - index`) named by their seqs instead."""
    for _, _, value in entry["w"]:
        if isinstance(value, dict) and "seqs" in value:
            value["seqs"] = [seqs[-1 - s] if s < 0 else s for s in value["seqs"]]


def is_message_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(m, BaseMessage) and not isinstance(m, RemoveMessage) for m in value
    )


K = TypeVar("K")
V = TypeVar("V")


class Recent(OrderedDict[K, V]):
    """A dict of the `size` entries set or read last (a run needs only its
    last checkpoint's list, and each list holds the whole history)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: K, default: Any = None) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


def loop_lock(
    locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock],
) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    found = locks.get(loop)
    if found is None:
        found = locks[loop] = asyncio.Lock()
    return found


class Thread:
    """One thread as this saver knows it: its conversation, its log, and
    the messages of the checkpoints it read or wrote."""

    def __init__(self, repository: ConversationRepository, thread_id: str, key: str) -> None:
        self.repository = repository
        self.thread_id = thread_id
        self.key = key
        self.log = ThreadLog(repository, key)
        self.conversation = Conversation(repository, key)
        # Each checkpoint's message list as a run that put it (or read it)
        # holds it, by (run, namespace, checkpoint, channel): what that
        # run's next checkpoint is compared with. Runs hold lists of their
        # own: another run may have read the same checkpoint merged.
        self.views: Recent[tuple[int, str, str, str], list[Entry]] = Recent(MAX_LISTS)
        # Each record's message list as stored, by (record version, channel).
        self.stored: Recent[tuple[int, str], list[Entry]] = Recent(MAX_LISTS)
        # Messages known to be stored, by identity: a message object a run
        # holds again is not stored again.
        self.known: dict[int, Entry] = {}
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def lock(self) -> asyncio.Lock:
        """This thread's lock on the running loop: one operation at a time
        (the sync methods run on another loop than the async ones)."""
        return loop_lock(self._locks)

    def remember(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            self.known[id(entry[0])] = entry

    async def view(
        self, record: Record, holder: Record, channel: str, run: int
    ) -> list[BaseMessage]:
        """Fresh copies of the messages `holder` lists for `channel`, kept as
        what a run reading `record` holds."""
        entries = await self.stored_list(holder, channel)
        copies = [(m.model_copy(), seq, lc_id) for m, seq, lc_id in entries]
        self.views[(run, record.ns, record.id, channel)] = copies
        self.remember(copies)
        return [m for m, _, _ in copies]

    async def stored_list(self, record: Record, channel: str) -> list[Entry]:
        key = (record.version, channel)
        found: list[Entry] | None = self.stored.get(key)
        if found is None:
            found = await self.read_runs(record.data["msgs"][channel])
            self.stored[key] = found
            self.remember(found)
        return found

    async def read_runs(self, runs: Sequence[Sequence[int]]) -> list[Entry]:
        """The messages of `runs` (first and last seq, inclusive), whatever
        their agent: a graph's list also holds the messages a subgraph
        wrote, stored once, in the subgraph's lane."""
        entries: list[Entry] = []
        for first, last in runs:
            after = first - 1
            while after < last:
                page = await self.repository.read_messages(
                    self.key,
                    after_seq=after,
                    before_seq=last + 1,
                    limit=min(1000, last - after),
                )
                if not page:
                    break
                for stored in page:
                    message = to_langchain(stored)
                    entries.append((message, stored.seq, message.id))
                after = page[-1].seq
        return entries

    async def store_messages(self, ns: str, messages: Sequence[BaseMessage]) -> list[Entry]:
        """`messages` as entries: those already stored (the same objects,
        with the same id) by their seq; the others appended now, in order."""
        entries: list[Entry | None] = []
        missing: list[BaseMessage] = []
        for message in messages:
            known = self.known.get(id(message))
            if known is not None and known[0] is message and known[2] == message.id:
                entries.append(known)
            else:
                entries.append(None)
                missing.append(message)
        if missing:
            agent = message_lane(ns)
            drafts = [from_langchain(m).model_copy(update={"agent_id": agent}) for m in missing]
            appended = await self.conversation.append(drafts, _orphan)
            assert appended is not None
            fresh = iter(
                (m, stored.seq, m.id) for m, stored in zip(missing, appended.messages, strict=True)
            )
            entries = [e if e is not None else next(fresh) for e in entries]
            if appended.version - len(appended.messages) == self.log.high:
                self.log.high = appended.version
        found = cast(list[Entry], entries)
        self.remember(found)
        return found

    async def merge(
        self,
        ns: str,
        parent: Record | None,
        channel: str,
        entries: list[Entry],
        run: int,
    ) -> list[Entry]:
        """What the run changed in its parent's list (by message id: added,
        replaced, removed) applied to the thread's latest list: the same
        list when no other run wrote since, else both runs' messages."""
        base: list[Entry] = []
        for record in self.log.newest(ns):
            holder: Record | None = record
            if channel in record.data.get("refs", {}):
                holder = await self.log.record_at(int(record.data["refs"][channel]))
            elif channel not in record.data.get("msgs", {}):
                continue
            if holder is not None and channel in holder.data.get("msgs", {}):
                base = await self.stored_list(holder, channel)
            break
        # What the run held before: its removals are what it no longer
        # holds. Unknown (not kept in memory): nothing is removed, rather
        # than another run's messages.
        before: list[Entry] = []
        if parent is not None:
            before = self.views.get((run, parent.ns, parent.id, channel)) or []
        removed = {e[2] for e in before} - {e[2] for e in entries}
        merged = [e for e in base if e[2] not in removed]
        at = {e[2]: i for i, e in enumerate(merged) if e[2] is not None}
        for entry in entries:
            i = at.get(entry[2]) if entry[2] is not None else None
            if i is None:
                if entry[2] is not None:
                    at[entry[2]] = len(merged)
                merged.append(entry)
            else:
                merged[i] = entry
        return merged
