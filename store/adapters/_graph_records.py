"""How the LangGraph saver writes a checkpoint as a record of its thread's
log (`store.adapters._graph_log`): which channels' values it holds inline,
which as runs of message seqs, and which it points to at an earlier record.
"""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from store.adapters._graph_log import (
    Record,
)
from store.adapters._graph_threads import Entry, Thread, seq_runs
from store.adapters._graph_values import decode, encode

HOLDER_SEARCH = 16  # recent records searched for a channel's value beside the parent's


def checkpoint_record(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    lists: dict[str, list[Entry]],
    parent: Record | None,
    thread: Thread,
    *,
    serde: SerializerProtocol,
    plain_json: bool,
) -> dict[str, Any]:
    """The record of `checkpoint`: the values of the channels it changed
    (message lists `lists` as runs of seqs), and where the others are held."""
    ns = str(config["configurable"].get("checkpoint_ns", ""))
    values = checkpoint["channel_values"]
    # The id is the record's own (`id`): not stored twice.
    rest = {k: v for k, v in checkpoint.items() if k not in ("channel_values", "id")}
    blobs: dict[str, Any] = {}
    for channel in new_versions:
        if channel in lists:
            continue
        blobs[channel] = (
            encode(values[channel], serde, plain_json=plain_json) if channel in values else {"e": 1}
        )
    refs: dict[str, int] = {}
    for channel, version in checkpoint["channel_versions"].items():
        if channel in new_versions or channel in lists:
            continue
        found = holder(thread, ns, parent, channel, version, serde)
        if found is not None:
            refs[channel] = found
    return {
        "ns": ns,
        "id": checkpoint["id"],
        "parent": config["configurable"].get("checkpoint_id"),
        "cp": encode(rest, serde, plain_json=plain_json),
        "md": encode(get_checkpoint_metadata(config, metadata), serde, plain_json=plain_json),
        "blobs": blobs,
        "msgs": {channel: seq_runs([seq for _, seq, _ in e]) for channel, e in lists.items()},
        "refs": refs,
    }


def holder(
    thread: Thread,
    ns: str,
    parent: Record | None,
    channel: str,
    version: Any,
    serde: SerializerProtocol,
) -> int | None:
    """The event version of the record holding `channel` at `version`:
    the parent's (or where it points), else any record read that has it."""
    recent = itertools.islice(thread.log.newest(ns), HOLDER_SEARCH)
    for record in itertools.chain([parent] if parent is not None else [], recent):
        if channel_versions(record, serde).get(channel) != version:
            continue
        if channel in record.data.get("blobs", {}) or channel in record.data.get("msgs", {}):
            return record.version
        if channel in record.data.get("refs", {}):
            return int(record.data["refs"][channel])
    return None


def channel_versions(record: Record, serde: SerializerProtocol) -> dict[str, Any]:
    """The channels' versions of the checkpoint `record` holds (decoded once)."""
    if record.versions is None:
        record.versions = dict(decode(record.data["cp"], serde).get("channel_versions", {}))
    return record.versions
