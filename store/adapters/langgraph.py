"""A LangGraph checkpointer (`BaseCheckpointSaver`, sync and async) over convo-store.

    from store.adapters.langgraph import ConvoSaver

    graph = builder.compile(checkpointer=ConvoSaver(repository))
    await graph.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t-1"}})

How a thread is kept (docs/adapters.md has the whole mapping):
- a thread is a conversation whose id is the thread id (after
  `delete_thread` the id stays a tombstone, so the thread's next
  conversation is `<thread id>~2`, and so on);
- the `messages` channel's messages are the conversation's messages, each
  appended once (as the LangChain history adapter maps them,
  `store.adapters.langchain`), when a node writes them or when a
  checkpoint first holds them; a checkpoint names its list as runs of
  seqs, so a checkpoint costs a few bytes whatever the history's length.
  The root graph's messages are the `main` agent's, a subgraph's those of
  the agent `graph:<namespace>`;
- every other channel value is a blob stored once per version, in the
  record of the checkpoint that changed it; checkpoints and pending
  writes are events of the conversation's log (`store.adapters._graph_log`);
- `copy_thread` is the store's `fork` (the messages keep their seqs) and
  the source's records written again after it;
- runs that continue a thread's latest checkpoint (LangGraph asked for the
  latest) never lose each other's messages: when another run put a
  checkpoint since this one read its parent, the messages this run added
  (or removed, or replaced) are applied to that newer checkpoint's list,
  under the store's optimistic concurrency. Other channels are the last
  writer's, as in LangGraph's own savers. A run resumed from an explicit
  checkpoint id (time travel) branches off it, as LangGraph expects.

Not implemented (optional in LangGraph): `delete_for_runs` and `prune`
(the log is append-only: nothing is deleted short of the whole thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from store.adapters._conversation import Conversation
from store.adapters._graph_log import (
    CHECKPOINT_SLOT,
    WRITES_KEY,
    WRITES_SLOT,
    Record,
    ThreadLog,
    dumps,
    lane,
    state_lane,
)
from store.adapters._graph_values import decode, encode
from store.adapters._loop import run_sync
from store.adapters.langchain import _orphan, from_langchain, to_langchain
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationNotFound,
)
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.records import StreamState
from store.repository import ConversationRepository

__all__ = ["ConvoSaver"]

# (message, its seq, its LangChain id when it was stored)
Entry = tuple[BaseMessage, int, str | None]

MAX_RUNS = 1024  # runs remembered as continuing their thread
MAX_THREADS = 256
MAX_LISTS = 64  # message lists a thread keeps in memory (views and stored)
RETRIES = 256
HOLDER_SEARCH = 16  # recent records searched for a channel's value beside the parent's
_RUNTIME = "__pregel_runtime"


def message_lane(ns: str) -> str:
    """The agent whose messages namespace `ns`'s are."""
    return "main" if not ns else lane("graph", ns)


def _runs(seqs: Sequence[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for seq in seqs:
        if runs and runs[-1][1] + 1 == seq:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return runs


def _resolve_writes(entry: dict[str, Any], seqs: Sequence[int]) -> None:
    """`entry`'s messages named by their place among those appended with it
    (`-1 - index`) named by their seqs instead."""
    for _, _, value in entry["w"]:
        if isinstance(value, dict) and "seqs" in value:
            value["seqs"] = [seqs[-1 - s] if s < 0 else s for s in value["seqs"]]


def _is_message_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(m, BaseMessage) and not isinstance(m, RemoveMessage) for m in value
    )


K = TypeVar("K")
V = TypeVar("V")


class _Recent(OrderedDict[K, V]):
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


def _loop_lock(
    locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock],
) -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    found = locks.get(loop)
    if found is None:
        found = locks[loop] = asyncio.Lock()
    return found


class _Thread:
    """One thread as this saver knows it: its conversation, its log, and
    the messages of the checkpoints it read or wrote."""

    def __init__(self, repository: ConversationRepository, thread_id: str, key: str) -> None:
        self.thread_id = thread_id
        self.key = key
        self.log = ThreadLog(repository, key)
        self.conversation = Conversation(repository, key)
        # Each checkpoint's message list as a run that put it (or read it)
        # holds it, by (run, namespace, checkpoint, channel): what that
        # run's next checkpoint is compared with. Runs hold lists of their
        # own: another run may have read the same checkpoint merged.
        self.views: _Recent[tuple[int, str, str, str], list[Entry]] = _Recent(MAX_LISTS)
        # Each record's message list as stored, by (record version, channel).
        self.stored: _Recent[tuple[int, str], list[Entry]] = _Recent(MAX_LISTS)
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
        return _loop_lock(self._locks)

    def remember(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            self.known[id(entry[0])] = entry


class ConvoSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints in convo-store conversations (see the module docstring).

    `repository`: any `store.repository.Repository` (PostgreSQL or the
    in-memory one); the saver talks to nothing else. `loop`: where the sync
    methods run the async ones (the loop the repository's storage lives on,
    running in another thread), else the adapters' background loop.
    `message_channels`: the channels kept as conversation messages when
    their value is a list of LangChain messages.
    """

    def __init__(
        self,
        repository: ConversationRepository,
        *,
        serde: SerializerProtocol | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        message_channels: Sequence[str] = ("messages",),
    ) -> None:
        super().__init__(serde=serde)
        self.repository = repository
        self._plain_json = serde is None
        self._loop = loop
        self.message_channels = frozenset(message_channels)
        self._threads: OrderedDict[str, _Thread] = OrderedDict()
        # Runs that read their thread's latest checkpoint, by LangGraph's
        # per-run control object (held, so its id stays its own; the oldest
        # are forgotten): their checkpoints continue the thread.
        self._continuing: OrderedDict[int, Any] = OrderedDict()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    # --- threads -------------------------------------------------------------------

    async def _thread(self, thread_id: str, *, create: bool = False) -> _Thread | None:
        async with _loop_lock(self._locks):
            return await self._open_thread(thread_id, create=create)

    async def _open_thread(self, thread_id: str, *, create: bool) -> _Thread | None:
        thread = self._threads.get(thread_id)
        if thread is None:
            key, exists = await self._current_key(thread_id)
            if not exists and not create:
                return None
            thread = _Thread(self.repository, thread_id, key)
            self._threads[thread_id] = thread
            while len(self._threads) > MAX_THREADS:
                self._threads.popitem(last=False)
        self._threads.move_to_end(thread_id)
        if create and not thread.conversation._exists:
            with contextlib.suppress(ConcurrencyConflict):
                await self.repository.create_conversation(
                    thread.key, metadata={"langgraph": {"thread_id": thread_id[:1000]}}
                )
            thread.conversation._exists = True
        return thread

    async def _current_key(self, thread_id: str) -> tuple[str, bool]:
        """The conversation of `thread_id` now: the first of `id`, `id~2`,
        ... that was not deleted; and whether it exists."""
        key, generation = thread_id, 1
        while True:
            try:
                await self.repository.get_conversation(key)
                return key, True
            except ConversationNotFound:
                return key, False
            except ConversationDeleted:
                generation += 1
                key = f"{thread_id}~{generation}"

    @staticmethod
    def _run(config: RunnableConfig) -> Any:
        runtime = config.get("configurable", {}).get(_RUNTIME)
        return getattr(runtime, "control", None) or runtime

    def _run_key(self, config: RunnableConfig) -> int:
        """The run's key for its message lists (0: no run, a direct call)."""
        run = self._run(config)
        return 0 if run is None else id(run)

    def _run_continues(self, config: RunnableConfig) -> bool:
        run = self._run(config)
        return run is not None and self._continuing.get(id(run)) is run

    def _mark_continuing(self, config: RunnableConfig) -> None:
        run = self._run(config)
        if run is not None:
            self._continuing[id(run)] = run
            self._continuing.move_to_end(id(run))
            while len(self._continuing) > MAX_RUNS:
                self._continuing.popitem(last=False)

    # --- reading ---------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            self._mark_continuing(config)
        thread = await self._thread(thread_id)
        if thread is None:
            return None
        async with thread.lock:
            record = await thread.log.find(ns, checkpoint_id)
            if record is None:
                return None
            return await self._tuple(thread, record, self._run_key(config))

    async def _tuple(self, thread: _Thread, record: Record, run: int = 0) -> CheckpointTuple:
        data = record.data
        checkpoint = cast(Checkpoint, {**decode(data["cp"], self.serde), "id": data["id"]})
        values: dict[str, Any] = {}
        for channel, stored in data.get("blobs", {}).items():
            if "e" not in stored:
                values[channel] = decode(stored, self.serde)
        for channel in data.get("msgs", {}):
            values[channel] = await self._view(thread, record, record, channel, run)
        for channel, version in data.get("refs", {}).items():
            holder = await thread.log.record_at(int(version))
            if holder is None:
                continue
            if channel in holder.data.get("msgs", {}):
                values[channel] = await self._view(thread, record, holder, channel, run)
            elif channel in holder.data.get("blobs", {}):
                stored = holder.data["blobs"][channel]
                if "e" not in stored:
                    values[channel] = decode(stored, self.serde)
        checkpoint = {**checkpoint, "channel_values": values}
        config: RunnableConfig = {
            "configurable": {
                "thread_id": thread.thread_id,
                "checkpoint_ns": record.ns,
                "checkpoint_id": record.id,
            }
        }
        parent = data.get("parent")
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=cast(CheckpointMetadata, decode(data["md"], self.serde)),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread.thread_id,
                        "checkpoint_ns": record.ns,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None
            ),
            pending_writes=[
                (task, channel, await self._write_value(thread, record.ns, value))
                for task, channel, value, _ in thread.log.writes_of(record.ns, record.id)
            ],
        )

    async def _view(
        self, thread: _Thread, record: Record, holder: Record, channel: str, run: int
    ) -> list[BaseMessage]:
        """Fresh copies of the messages `holder` lists for `channel`, kept as
        what a run reading `record` holds."""
        entries = await self._stored_list(thread, holder, channel)
        copies = [(m.model_copy(), seq, lc_id) for m, seq, lc_id in entries]
        thread.views[(run, record.ns, record.id, channel)] = copies
        thread.remember(copies)
        return [m for m, _, _ in copies]

    async def _stored_list(self, thread: _Thread, record: Record, channel: str) -> list[Entry]:
        key = (record.version, channel)
        found: list[Entry] | None = thread.stored.get(key)
        if found is None:
            found = await self._read_runs(thread, record.ns, record.data["msgs"][channel])
            thread.stored[key] = found
            thread.remember(found)
        return found

    async def _read_runs(
        self, thread: _Thread, ns: str, runs: Sequence[Sequence[int]]
    ) -> list[Entry]:
        entries: list[Entry] = []
        agent = message_lane(ns)
        for first, last in runs:
            after = first - 1
            while after < last:
                page = await self.repository.read_messages(
                    thread.key,
                    after_seq=after,
                    before_seq=last + 1,
                    limit=min(1000, last - after),
                    agent_id=agent,
                )
                if not page:
                    break
                for stored in page:
                    message = to_langchain(stored)
                    entries.append((message, stored.seq, message.id))
                after = page[-1].seq
        return entries

    async def _write_value(self, thread: _Thread, ns: str, stored: dict[str, Any]) -> Any:
        if "seqs" not in stored:
            return decode(stored, self.serde)
        entries = await self._read_runs(thread, ns, _runs(stored["seqs"]))
        by_seq = {seq: (m, seq, lc_id) for m, seq, lc_id in entries}
        entries = [by_seq[seq] for seq in stored["seqs"] if seq in by_seq]
        copies = [(m.model_copy(), seq, lc_id) for m, seq, lc_id in entries]
        thread.remember(copies)
        messages = [m for m, _, _ in copies]
        return messages[0] if stored.get("one") else messages

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first (in the order they were put), of one
        thread (and namespace, when the config names one), or of every
        thread this saver's conversations hold when `config` is None."""
        checkpoint_id = None
        if config is None:
            thread_ids = [t async for t in self._thread_ids()]
            ns: str | None = None
        else:
            thread_ids = [str(config["configurable"]["thread_id"])]
            ns = config["configurable"].get("checkpoint_ns")
            checkpoint_id = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread_id in thread_ids:
            thread = await self._thread(thread_id)
            if thread is None:
                continue
            async with thread.lock:
                await thread.log.read_all()
                records = list(thread.log.newest(ns))
            for record in records:
                if left is not None and left <= 0:
                    return
                if config is not None and checkpoint_id and record.id != checkpoint_id:
                    continue
                if before_id is not None and record.id >= before_id:
                    continue
                if filter:
                    metadata = decode(record.data["md"], self.serde)
                    if not all(metadata.get(k) == v for k, v in filter.items()):
                        continue
                async with thread.lock:
                    found = await self._tuple(thread, record)
                if left is not None:
                    left -= 1
                yield found

    async def _thread_ids(self) -> AsyncIterator[str]:
        cursor = None
        seen: set[str] = set()
        while True:
            page = await self.repository.list_conversations(
                metadata={"langgraph": {}}, cursor=cursor, limit=100
            )
            for conversation in page.items:
                found = conversation.metadata.get("langgraph", {}).get("thread_id")
                if isinstance(found, str) and found not in seen:
                    seen.add(found)
                    yield found
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    # --- writing -----------------------------------------------------------------------

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = str(configurable.get("checkpoint_ns", ""))
        parent = configurable.get("checkpoint_id")
        thread = cast(_Thread, await self._thread(thread_id, create=True))
        values = checkpoint["channel_values"]
        continues = parent is None or self._run_continues(config)
        async with thread.lock:
            if not thread.log.started:
                await thread.log.follow()
            parent_record = None
            if parent is not None:
                parent_record = await thread.log.find(ns, str(parent))
            # The run's lists, each message stored once.
            lists: dict[str, list[Entry]] = {}
            for channel in self.message_channels:
                held = channel in new_versions or (
                    continues and channel in checkpoint["channel_versions"]
                )
                if held and _is_message_list(values.get(channel)):
                    lists[channel] = await self._store_messages(thread, ns, values[channel])
            for attempt in range(RETRIES):
                merged = dict(lists)
                if continues:
                    for channel, entries in lists.items():
                        merged[channel] = await self._merge(
                            thread, ns, parent_record, channel, entries, self._run_key(config)
                        )
                data = self._record(
                    config, checkpoint, metadata, new_versions, merged, parent_record, thread
                )
                expected = thread.log.high if continues else StreamState.ANY
                try:
                    version = await self.repository.update_slot(
                        thread.key,
                        CHECKPOINT_SLOT,
                        dumps(data),
                        agent_id=state_lane(ns),
                        expected_version=expected,
                    )
                except ConcurrencyConflict:
                    # Another writer got in first: read what it wrote, wait a
                    # little (writers that retry in step keep colliding).
                    await thread.log.follow()
                    await asyncio.sleep(random.uniform(0, min(0.001 * attempt, 0.02)))
                    continue
                if version == thread.log.high + 1:
                    thread.log.high = version
                record = thread.log.add_record(version, data)
                for channel, entries in merged.items():
                    thread.stored[(record.version, channel)] = entries
                for channel, entries in lists.items():
                    thread.views[(self._run_key(config), ns, record.id, channel)] = entries
                break
            else:  # pragma: no cover - other writers won every race
                raise ConcurrencyConflict(thread.key, "the thread kept changing", None)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _record(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
        lists: dict[str, list[Entry]],
        parent: Record | None,
        thread: _Thread,
    ) -> dict[str, Any]:
        ns = str(config["configurable"].get("checkpoint_ns", ""))
        values = checkpoint["channel_values"]
        # The id is the record's own (`id`): not stored twice.
        rest = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
        blobs: dict[str, Any] = {}
        for channel in new_versions:
            if channel in lists:
                continue
            blobs[channel] = (
                encode(values[channel], self.serde, plain_json=self._plain_json)
                if channel in values
                else {"e": 1}
            )
        refs: dict[str, int] = {}
        for channel, version in checkpoint["channel_versions"].items():
            if channel in new_versions or channel in lists:
                continue
            found = self._holder(thread, ns, parent, channel, version)
            if found is not None:
                refs[channel] = found
        return {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": config["configurable"].get("checkpoint_id"),
            "cp": encode(rest, self.serde, plain_json=self._plain_json),
            "md": encode(
                get_checkpoint_metadata(config, metadata), self.serde, plain_json=self._plain_json
            ),
            "blobs": blobs,
            "msgs": {channel: _runs([seq for _, seq, _ in e]) for channel, e in lists.items()},
            "refs": refs,
        }

    def _holder(
        self, thread: _Thread, ns: str, parent: Record | None, channel: str, version: Any
    ) -> int | None:
        """The event version of the record holding `channel` at `version`:
        the parent's (or where it points), else any record read that has it."""
        recent = itertools.islice(thread.log.newest(ns), HOLDER_SEARCH)
        for record in itertools.chain([parent] if parent is not None else [], recent):
            if self._versions(record).get(channel) != version:
                continue
            if channel in record.data.get("blobs", {}) or channel in record.data.get("msgs", {}):
                return record.version
            if channel in record.data.get("refs", {}):
                return int(record.data["refs"][channel])
        return None

    def _versions(self, record: Record) -> dict[str, Any]:
        if record.versions is None:
            record.versions = dict(
                decode(record.data["cp"], self.serde).get("channel_versions", {})
            )
        return record.versions

    async def _store_messages(
        self, thread: _Thread, ns: str, messages: Sequence[BaseMessage]
    ) -> list[Entry]:
        """`messages` as entries: those already stored (the same objects,
        with the same id) by their seq; the others appended now, in order."""
        entries: list[Entry | None] = []
        missing: list[BaseMessage] = []
        for message in messages:
            known = thread.known.get(id(message))
            if known is not None and known[0] is message and known[2] == message.id:
                entries.append(known)
            else:
                entries.append(None)
                missing.append(message)
        if missing:
            agent = message_lane(ns)
            drafts = [from_langchain(m).model_copy(update={"agent_id": agent}) for m in missing]
            appended = await thread.conversation.append(drafts, _orphan)
            assert appended is not None
            fresh = iter(
                (m, stored.seq, m.id) for m, stored in zip(missing, appended.messages, strict=True)
            )
            entries = [e if e is not None else next(fresh) for e in entries]
            if appended.version - len(appended.messages) == thread.log.high:
                thread.log.high = appended.version
        found = cast(list[Entry], entries)
        thread.remember(found)
        return found

    async def _merge(
        self,
        thread: _Thread,
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
        for record in thread.log.newest(ns):
            holder: Record | None = record
            if channel in record.data.get("refs", {}):
                holder = await thread.log.record_at(int(record.data["refs"][channel]))
            elif channel not in record.data.get("msgs", {}):
                continue
            if holder is not None and channel in holder.data.get("msgs", {}):
                base = await self._stored_list(thread, holder, channel)
            break
        # What the run held before: its removals are what it no longer
        # holds. Unknown (not kept in memory): nothing is removed, rather
        # than another run's messages.
        before: list[Entry] = []
        if parent is not None:
            before = thread.views.get((run, parent.ns, parent.id, channel)) or []
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

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns", ""))
        thread = cast(_Thread, await self._thread(str(configurable["thread_id"]), create=True))
        async with thread.lock:
            fresh: list[BaseMessage] = []  # messages to append with this entry
            stored = [
                [
                    WRITES_IDX_MAP.get(channel, idx),
                    channel,
                    self._write_entry(thread, channel, v, fresh),
                ]
                for idx, (channel, v) in enumerate(writes)
            ]
            entry = {
                "ns": ns,
                "id": configurable["checkpoint_id"],
                "task": task_id,
                "path": task_path,
                "w": stored,
            }
            version = await self._append_with(thread, ns, fresh, entry) if fresh else None
            if version is None:
                version = await self.repository.update_slot(
                    thread.key, WRITES_SLOT, dumps(entry), agent_id=state_lane(ns)
                )
                if version == thread.log.high + 1:
                    thread.log.high = version
            thread.log.add_writes(version, entry)

    def _write_entry(
        self, thread: _Thread, channel: str, value: Any, fresh: list[BaseMessage]
    ) -> Any:
        """A write's value: messages written to a message channel are the
        conversation's messages, named by seq (a new one by its place among
        `fresh`, the messages this write appends: `-1 - index`); other
        values inline."""
        if channel in self.message_channels:
            one = isinstance(value, BaseMessage)
            messages = [value] if one else value
            if messages and _is_message_list(messages):
                seqs = []
                for message in messages:
                    known = thread.known.get(id(message))
                    if known is not None and known[0] is message and known[2] == message.id:
                        seqs.append(known[1])
                    else:
                        if not any(m is message for m in fresh):
                            fresh.append(message)
                        seqs.append(-1 - next(i for i, m in enumerate(fresh) if m is message))
                found: dict[str, Any] = {"seqs": seqs}
                if one:
                    found["one"] = True
                return found
        return encode(value, self.serde, plain_json=self._plain_json)

    async def _append_with(
        self, thread: _Thread, ns: str, fresh: list[BaseMessage], entry: dict[str, Any]
    ) -> int | None:
        """Append `fresh` with `entry` in the last one's metadata (one write
        for both); `entry` is then resolved to seqs. The version of that
        message's event, or None when the entry could not ride along (too
        large for metadata, or the message was stored opaque): then the
        messages are appended and `entry` must be written on its own."""
        agent = message_lane(ns)
        drafts = [from_langchain(m).model_copy(update={"agent_id": agent}) for m in fresh]
        carrier = drafts[-1]
        metadata = {**carrier.metadata, WRITES_KEY: entry}
        rides = json_problem(metadata, max_chars=MAX_METADATA_CHARS) is None
        if rides:
            drafts[-1] = carrier.model_copy(update={"metadata": metadata})
        appended = await thread.conversation.append(drafts, _orphan)
        assert appended is not None
        seqs = [m.seq for m in appended.messages]
        entries = [(m, seq, m.id) for m, seq in zip(fresh, seqs, strict=True)]
        thread.remember(entries)
        if appended.version - len(seqs) == thread.log.high:
            thread.log.high = appended.version
        _resolve_writes(entry, seqs)
        if rides and WRITES_KEY in appended.messages[-1].metadata:
            return appended.version
        return None

    # --- whole threads -------------------------------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's conversation (the store's `delete`: its
        events and views are purged; the thread's next checkpoint starts a
        new conversation)."""
        self._threads.pop(thread_id, None)
        key, exists = await self._current_key(thread_id)
        if exists:
            with contextlib.suppress(ConversationNotFound, ConversationDeleted):
                await self.repository.delete(key)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread: the store's `fork` of its conversation (every
        message, with its seq), then every checkpoint and write of the
        source written again, in the source's order."""
        source = await self._thread(source_thread_id)
        if source is None:
            return
        key, exists = await self._current_key(target_thread_id)
        if exists:
            raise ValueError(f"thread {target_thread_id!r} already has checkpoints")
        async with source.lock:
            await source.log.read_all()
            events = sorted(source.log.by_version.items())
            await self.repository.fork(
                source.key,
                new_conversation_id=key,
                metadata={"langgraph": {"thread_id": target_thread_id[:1000]}},
            )
            writes = {k: w for k, w in source.log.writes.items()}
        self._threads.pop(target_thread_id, None)
        for _, record in events:
            await self.repository.update_slot(
                key, CHECKPOINT_SLOT, dumps(record.data), agent_id=state_lane(record.ns)
            )
            found = writes.get((record.ns, record.id))
            for (task, index), (_, channel, value, path) in (found.by_key if found else {}).items():
                entry = {
                    "ns": record.ns,
                    "id": record.id,
                    "task": task,
                    "path": path,
                    "w": [[index, channel, value]],
                }
                await self.repository.update_slot(
                    key, WRITES_SLOT, dumps(entry), agent_id=state_lane(record.ns)
                )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """As LangGraph's own savers, a counter and a random part, so two
        branches never make the same version of a channel; shorter (every
        checkpoint stores each channel's version twice): ten digits, then
        eight hex digits."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:010}.{random.getrandbits(32):08x}"

    # --- the sync half -------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return run_sync(self.aget_tuple(config), self._loop)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        return iter(run_sync(collect(), self._loop))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return run_sync(self.aput(config, checkpoint, metadata, new_versions), self._loop)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run_sync(self.aput_writes(config, writes, task_id, task_path), self._loop)

    def delete_thread(self, thread_id: str) -> None:
        run_sync(self.adelete_thread(thread_id), self._loop)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        run_sync(self.acopy_thread(source_thread_id, target_thread_id), self._loop)
