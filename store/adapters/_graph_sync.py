"""The sync half of a LangGraph checkpointer: each sync method runs its
async twin to completion (`store.adapters._loop.run_sync`), on the loop
the saver was given or the adapters' background loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from store.adapters._loop import run_sync


class SyncCheckpointSaver(BaseCheckpointSaver[str]):
    """A checkpointer whose sync methods are its async ones, run to the end."""

    _loop: asyncio.AbstractEventLoop | None

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
