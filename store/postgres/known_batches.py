"""The batch each agent's window was last found in, per storage: what a
whole-window read expects, so that it goes out with the conversation's row
in one round trip (`reads`, docs/storage.md, "Whole-window reads").

Only a hint. The read checks it inside its own statement
(`window_sql.agent_window_in`) and reads again from the batch the window
is in when another process moved it meanwhile; a wrong or forgotten entry
costs a round trip, never a stale window. Batch 1, where every window
starts and where a never-compacted one stays, is not kept: it is what a
window not remembered is read as.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

# Agents' windows remembered, at most: the most recently read are kept.
MAX_KNOWN = 10_000

FIRST_BATCH = 1


class KnownBatches:
    """Agents' windows, by conversation and agent, and the batch each was
    last found in (any but the first)."""

    def __init__(self, limit: int = MAX_KNOWN) -> None:
        self._batches: OrderedDict[tuple[uuid.UUID, str], int] = OrderedDict()
        self._limit = limit

    def batch(self, conversation_id: uuid.UUID, agent_id: str) -> int:
        """The batch to read the agent's window from."""
        return self._batches.get((conversation_id, agent_id), FIRST_BATCH)

    def found(self, conversation_id: uuid.UUID, agent_id: str, batch: int) -> None:
        """The agent's window was read from `batch`, which was current."""
        key = (conversation_id, agent_id)
        if batch == FIRST_BATCH:
            self._batches.pop(key, None)
            return
        self._batches[key] = batch
        self._batches.move_to_end(key)
        if len(self._batches) > self._limit:
            self._batches.popitem(last=False)
