"""A LangGraph thread's checkpoints and pending writes, kept in its conversation's log.

Each namespace of a thread has a *state lane*: an agent of the
conversation (`langgraph` for the root graph, `langgraph:<ns>` for a
subgraph) that never has messages. Every `put` is one `update_slot` of its
slot `checkpoint`, every `put_writes` one of its slot `writes`: so each is
one event of the log, in commit order, and the slot's current value is the
namespace's latest. The projection keeps only the latest value; earlier
ones are read back from the log by version (`conversation_events`), which
is the stream's primary key.

A record names where each channel's value lives: inline (`blobs`, the
channels this checkpoint changed, each stored once), as runs of message
seqs (`msgs`: the messages channel, whose messages are the conversation's
own), or at the record of an earlier version (`refs`, by event version).

`ThreadLog` follows one conversation's log from where it last read
(`high`) and, when asked for something older, reads back page by page
(`low`): the latest checkpoint costs one read of the events since the last
call; an old one costs reading back to it.
"""

from __future__ import annotations

import bisect
import copy
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from store.domain.errors import ConversationNotFound
from store.domain.feed import MAX_FEED_LIMIT
from store.domain.inputs import MAX_AGENT_ID_CHARS
from store.repository import ConversationRepository

STATE_AGENT = "langgraph"
CHECKPOINT_SLOT = "checkpoint"
WRITES_SLOT = "writes"
# Pending writes that append messages ride in the last one's metadata.
WRITES_KEY = "langgraph_writes"
PAGE = 256


def lane(prefix: str, ns: str) -> str:
    """An agent id for namespace `ns`: `prefix` for the root graph, else
    `prefix:ns` (hashed when longer than an agent id may be)."""
    if not ns:
        return prefix
    name = f"{prefix}:{ns}"
    if len(name) <= MAX_AGENT_ID_CHARS and name.isprintable():
        return name
    digest = hashlib.sha256(ns.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{prefix}:{ns[:40]}~{digest}" if ns[:40].isprintable() else f"{prefix}:~{digest}"


def state_lane(ns: str) -> str:
    return lane(STATE_AGENT, ns)


def dumps(entry: dict[str, Any]) -> str:
    """An entry as JSON text the store accepts (no NUL, no lone surrogate:
    orjson refuses the latter, and the ASCII-escaped form then holds it)."""
    try:
        return orjson.dumps(entry).decode()
    except TypeError:
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=True)


@dataclass
class Record:
    """A checkpoint as stored: `version` is its event's."""

    version: int
    ns: str
    data: dict[str, Any]
    versions: dict[str, Any] | None = None  # its channel versions, once decoded

    @property
    def id(self) -> str:
        return str(self.data["id"])


@dataclass
class Writes:
    """Pending writes of one checkpoint, by (task id, index): a regular
    write is kept as first written, a special one (negative index) as last."""

    by_key: dict[tuple[str, int], tuple[str, str, Any, str]] = field(default_factory=dict)

    def add(self, entry: dict[str, Any]) -> None:
        task, path = str(entry["task"]), str(entry.get("path", ""))
        for idx, channel, value in entry["w"]:
            key = (task, int(idx))
            if key[1] >= 0 and key in self.by_key:
                continue
            self.by_key[key] = (task, str(channel), value, path)

    def ordered(self) -> list[tuple[str, str, Any, str]]:
        """In LangGraph's `writes_sort_key` order: task path, task id, index."""
        return [self.by_key[k] for k in sorted(self.by_key, key=lambda k: (self.by_key[k][3], *k))]


def _resolved(entry: dict[str, Any], seq: int) -> dict[str, Any]:
    """A writes entry carried by the message `seq`, the last of those it
    appended: each `-1 - k` (the k-th of them) as its seq (on a copy: the
    event's data is the storage's)."""
    entry = copy.deepcopy(entry)
    count = max(
        (-s for _, _, v in entry["w"] if isinstance(v, dict) for s in v.get("seqs", ()) if s < 0),
        default=0,
    )
    for _, _, value in entry["w"]:
        if isinstance(value, dict) and "seqs" in value:
            value["seqs"] = [seq - count - s if s < 0 else s for s in value["seqs"]]
    return entry


class ThreadLog:
    """What this process has read of one thread's conversation log."""

    def __init__(self, repository: ConversationRepository, key: str) -> None:
        self.repository = repository
        self.key = key
        self.high = 0  # every event up to here has been read ...
        self.low = 1  # ... from here on
        self.started = False
        self.records: dict[tuple[str, str], Record] = {}
        self.by_version: dict[int, Record] = {}
        # Record versions in log order, of each namespace and of all.
        self.order: dict[str | None, list[int]] = {None: []}
        self.writes: dict[tuple[str, str], Writes] = {}
        self.seen_writes: set[int] = set()

    # --- reading the log ------------------------------------------------------------

    async def follow(self) -> None:
        """Read every event since the last call (the first call only learns
        where the log ends: older events are read back when needed)."""
        if not self.started:
            try:
                version = (await self.repository.get_conversation(self.key)).version
            except ConversationNotFound:
                version = 0
            self.high, self.low, self.started = version, version + 1, True
            return
        while True:
            events = await self.repository.conversation_events(
                self.key, from_version=self.high + 1, limit=MAX_FEED_LIMIT
            )
            for event in events:
                self._take(event.version, event.type, event.data)
            if events:
                self.high = max(self.high, events[-1].version)
            if len(events) < MAX_FEED_LIMIT:
                return

    async def read_back(self) -> bool:
        """Read the page of events before `low`; False when there is none."""
        if self.low <= 1:
            return False
        start = max(1, self.low - PAGE)
        events = await self.repository.conversation_events(
            self.key, from_version=start, limit=self.low - start
        )
        for event in events:
            self._take(event.version, event.type, event.data)
        self.low = start
        return True

    async def record_at(self, version: int) -> Record | None:
        """The record written at event `version` (one read when not yet seen)."""
        if version not in self.by_version and not self.low <= version <= self.high:
            for event in await self.repository.conversation_events(
                self.key, from_version=version, limit=1
            ):
                self._take(event.version, event.type, event.data)
        return self.by_version.get(version)

    def _take(self, version: int, type_: str, data: dict[str, Any]) -> None:
        if type_ == "message_appended":
            metadata = data.get("message", {}).get("metadata") or {}
            if WRITES_KEY in metadata:
                self.add_writes(version, _resolved(metadata[WRITES_KEY], int(data["seq"])))
            return
        if type_ != "context_slot_updated" or not isinstance(data.get("text"), str):
            return
        agent = str(data.get("agent_id", ""))
        if agent != STATE_AGENT and not agent.startswith(STATE_AGENT + ":"):
            return
        entry = json.loads(data["text"])
        if data.get("slot") == CHECKPOINT_SLOT:
            self.add_record(version, entry)
        elif data.get("slot") == WRITES_SLOT:
            self.add_writes(version, entry)

    def add_record(self, version: int, entry: dict[str, Any]) -> Record:
        found = self.by_version.get(version)
        if found is not None:
            return found
        record = Record(version=version, ns=str(entry["ns"]), data=entry)
        self.by_version[version] = record
        for key in (None, record.ns):
            bisect.insort(self.order.setdefault(key, []), version)
        known = self.records.get((record.ns, record.id))
        # A record written again (a copied thread's) counts where it was
        # written last: the copy's order is the source's.
        if known is None or known.version < version:
            self.records[(record.ns, record.id)] = record
        return record

    def add_writes(self, version: int, entry: dict[str, Any]) -> None:
        if version in self.seen_writes:
            return
        self.seen_writes.add(version)
        self.writes.setdefault((str(entry["ns"]), str(entry["id"])), Writes()).add(entry)

    # --- what was read -----------------------------------------------------------------

    def newest(self, ns: str | None) -> Iterator[Record]:
        """The records read so far, of `ns` (None: every namespace), newest first."""
        for version in reversed(self.order.get(ns, [])):
            record = self.by_version[version]
            if self.records.get((record.ns, record.id)) is record:
                yield record

    def head(self, ns: str) -> Record | None:
        return next(self.newest(ns), None)

    async def find(self, ns: str, checkpoint_id: str | None) -> Record | None:
        """The record of `checkpoint_id` (None: the namespace's latest),
        reading back as far as needed; with the writes around it."""
        if checkpoint_id is not None and (ns, checkpoint_id) in self.records:
            return self.records[(ns, checkpoint_id)]
        await self.follow()
        while True:
            found = (
                self.head(ns) if checkpoint_id is None else self.records.get((ns, checkpoint_id))
            )
            if found is not None:
                # Writes saved while their checkpoint was still being put
                # land just before it: read a little further back.
                while self.low > max(1, found.version - 32) and await self.read_back():
                    pass
                return found
            if checkpoint_id is None and not await self._has_records(ns):
                return None
            if not await self.read_back():
                return None

    async def _has_records(self, ns: str) -> bool:
        """Whether namespace `ns` has any checkpoint (its slot is set)."""
        try:
            slots = await self.repository.context_slots(self.key, state_lane(ns))
        except ConversationNotFound:
            return False
        return CHECKPOINT_SLOT in slots.custom

    async def read_all(self) -> None:
        await self.follow()
        while await self.read_back():
            pass

    def writes_of(self, ns: str, checkpoint_id: str) -> list[tuple[str, str, Any, str]]:
        found = self.writes.get((ns, checkpoint_id))
        return found.ordered() if found is not None else []
