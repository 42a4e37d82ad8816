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
  the agent `graph:<namespace>`: each is stored in the lane of the graph
  that held it first, and a list names messages of any lane (a subgraph's
  answer in its parent's list is the same message, stored once);
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
import random
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from store.adapters._conversation import live_key
from store.adapters._graph_log import (
    CHECKPOINT_SLOT,
    WRITES_KEY,
    WRITES_SLOT,
    Record,
    dumps,
    state_lane,
)
from store.adapters._graph_records import checkpoint_record
from store.adapters._graph_sync import SyncCheckpointSaver
from store.adapters._graph_threads import (
    Entry,
    Thread,
    is_message_list,
    loop_lock,
    message_lane,
    resolve_writes,
    seq_runs,
)
from store.adapters._graph_values import decode, encode
from store.adapters.langchain import _orphan, from_langchain
from store.domain.errors import (
    ConcurrencyConflict,
    ConversationDeleted,
    ConversationNotFound,
)
from store.domain.inputs import MAX_METADATA_CHARS, json_problem
from store.domain.listing import ConversationQuery
from store.domain.records import StreamState
from store.repository import ConversationRepository

__all__ = ["ConvoSaver"]

MAX_RUNS = 1024  # runs remembered as continuing their thread
MAX_THREADS = 256
RETRIES = 256
_RUNTIME = "__pregel_runtime"


class ConvoSaver(SyncCheckpointSaver):
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
        self._threads: OrderedDict[str, Thread] = OrderedDict()
        # Runs that read their thread's latest checkpoint, by LangGraph's
        # per-run control object (held, so its id stays its own; the oldest
        # are forgotten): their checkpoints continue the thread.
        self._continuing: OrderedDict[int, Any] = OrderedDict()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    # --- threads -------------------------------------------------------------------

    async def _thread(self, thread_id: str, *, create: bool = False) -> Thread | None:
        async with loop_lock(self._locks):
            return await self._open_thread(thread_id, create=create)

    async def _open_thread(self, thread_id: str, *, create: bool) -> Thread | None:
        thread = self._threads.get(thread_id)
        if thread is None:
            key, exists = await live_key(self.repository, thread_id)
            if not exists and not create:
                return None
            thread = Thread(self.repository, thread_id, key)
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

    async def _tuple(self, thread: Thread, record: Record, run: int = 0) -> CheckpointTuple:
        data = record.data
        checkpoint = cast(Checkpoint, {**decode(data["cp"], self.serde), "id": data["id"]})
        values: dict[str, Any] = {}
        for channel, stored in data.get("blobs", {}).items():
            if "e" not in stored:
                values[channel] = decode(stored, self.serde)
        for channel in data.get("msgs", {}):
            values[channel] = await thread.view(record, record, channel, run)
        for channel, version in data.get("refs", {}).items():
            holder = await thread.log.record_at(int(version))
            if holder is None:
                continue
            if channel in holder.data.get("msgs", {}):
                values[channel] = await thread.view(record, holder, channel, run)
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
                (task, channel, await self._write_value(thread, value))
                for task, channel, value, _ in thread.log.writes_of(record.ns, record.id)
            ],
        )

    async def _write_value(self, thread: Thread, stored: dict[str, Any]) -> Any:
        if "seqs" not in stored:
            return decode(stored, self.serde)
        entries = await thread.read_runs(seq_runs(stored["seqs"]))
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
                ConversationQuery(metadata={"langgraph": {}}, cursor=cursor, limit=100)
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
        thread = cast(Thread, await self._thread(thread_id, create=True))
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
                if held and is_message_list(values.get(channel)):
                    lists[channel] = await thread.store_messages(ns, values[channel])
            for attempt in range(RETRIES):
                merged = dict(lists)
                if continues:
                    for channel, entries in lists.items():
                        merged[channel] = await thread.merge(
                            ns, parent_record, channel, entries, self._run_key(config)
                        )
                data = checkpoint_record(
                    config,
                    checkpoint,
                    metadata,
                    new_versions,
                    merged,
                    parent_record,
                    thread,
                    serde=self.serde,
                    plain_json=self._plain_json,
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
                thread.conversation.wrote(version)
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

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        ns = str(configurable.get("checkpoint_ns", ""))
        thread = cast(Thread, await self._thread(str(configurable["thread_id"]), create=True))
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
                thread.conversation.wrote(version)
            thread.log.add_writes(version, entry)

    def _write_entry(
        self, thread: Thread, channel: str, value: Any, fresh: list[BaseMessage]
    ) -> Any:
        """A write's value: messages written to a message channel are the
        conversation's messages, named by seq (a new one by its place among
        `fresh`, the messages this write appends: `-1 - index`); other
        values inline."""
        if channel in self.message_channels:
            one = isinstance(value, BaseMessage)
            messages = [value] if one else value
            if messages and is_message_list(messages):
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
        self, thread: Thread, ns: str, fresh: list[BaseMessage], entry: dict[str, Any]
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
        resolve_writes(entry, seqs)
        if rides and WRITES_KEY in appended.messages[-1].metadata:
            return appended.version
        return None

    # --- whole threads -------------------------------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's conversation (the store's `delete`: its
        events and views are purged; the thread's next checkpoint starts a
        new conversation)."""
        self._threads.pop(thread_id, None)
        key, exists = await live_key(self.repository, thread_id)
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
        key, exists = await live_key(self.repository, target_thread_id)
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
