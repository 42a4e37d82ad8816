"""The running hashes of stable prefixes already fingerprinted: a build
whose prefix only grew since the window's last build, or did not change,
hashes only its new messages' records, or none.

The fingerprint (`store.assembler.fingerprint`) is one sha256 fed message
by message, so the hash of a prefix, copied (`hashlib`'s `copy()`), is
where the fingerprint of any longer prefix that starts with it goes on.
Kept per window (conversation, agent) and format: the system prompt, the
identities of the messages hashed, in order, the running hash after them
and its hex digest.

Why a kept hash may be reused. A message's record is a function of two
stored JSON values: the event that appended it and its latest edit's.
Each row a storage reads for a payload build names both
(`store.domain.codec.StoredWindow`): the appending event by its position
in the log, which the storage gives an event once and never again (a
sequence: PostgreSQL's identity column, the memory tables' counter; the
events a restore puts back get new ones), and the edit by its version in
that conversation: the two events are in the log together, so they are
of the one life of the stream the position names (a deletion purges
every event of it), within which a version names one event. Events are
never changed once written. So two rows with the same identity have the
same record, and a kept hash is reused only when the identities it
covered are, in order, the first of the prefix's and the header's values
(format, system prompt) are equal: its state is then the state a new hash
reaches after those messages, and the digest is `fingerprint(...)`'s. The
window, its batch, the agent and the tenant play no part in that argument:
they only choose which kept hash to try, and after an edit inside the
prefix, a compaction, a fork or a deletion the identities differ and the
prefix is hashed from its start.

One cache per storage (`PrefixCache` is made by each storage and handed
out with the window it reads): positions name the events of one database
(two in-memory storages both count from 1), so a cache shared between
storages could take one's message for another's. Not one per repository:
the HTTP API makes a repository per request (`api.deps`). What it does not
see: a database put back to an earlier copy of itself under a running
process (a point-in-time recovery), whose sequence then hands out
positions again; such a process must be restarted.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from store.assembler.fingerprint import EXACT, digest_rows, feed_rows, prefix_hash

if TYPE_CHECKING:
    from hashlib import _Hash as Hash

Row = Sequence[Any]

# A row's identity, in the columns `StoredWindow` gives it.
_POSITION = itemgetter(2)
_EDIT_VERSION = itemgetter(3)

# Bounds: windows (each a few hundred bytes besides its identities) and the
# messages whose identities are kept (16 bytes each: 16 MiB in all).
WINDOWS = 4096
MESSAGES = 1 << 20


@dataclass(frozen=True, slots=True)
class _Hashed:
    """A prefix hashed: its header's system prompt, its messages' positions
    and edit versions, the running hash after them and its hex digest."""

    system_prompt: str | None
    positions: array[int]
    edits: array[int]
    running: Hash
    hexdigest: str


def _identities(rows: Sequence[Row]) -> tuple[array[int], array[int]]:
    # Each array is made from a list: from the map itself it is slower.
    return array("q", list(map(_POSITION, rows))), array("q", list(map(_EDIT_VERSION, rows)))


class PrefixCache:
    """The running hashes of the prefixes last fingerprinted, one per window
    and format, the least recently used let go first (see the module
    docstring). Safe to share between threads."""

    def __init__(self, *, windows: int = WINDOWS, messages: int = MESSAGES) -> None:
        self._hashed: OrderedDict[Hashable, _Hashed] = OrderedDict()
        self._windows = windows
        self._messages = messages
        self._kept = 0  # messages whose identities are kept
        self._lock = threading.Lock()

    def digest(
        self, window: Hashable, format: str, system_prompt: str | None, rows: Sequence[Row]
    ) -> str:
        """`digest_rows(format, system_prompt, rows)`: the fingerprint of the
        prefix stored as `rows`, rows as a storage reads them for a payload
        build (`StoredWindow`); `window` names the window they are the
        prefix of (any hashable value: it only chooses the hash tried)."""
        if not EXACT:  # records decoded from messages: see `fingerprint.feed_rows`
            return digest_rows(format, system_prompt, rows)
        positions, edits = _identities(rows)
        key = (window, format)
        with self._lock:
            hashed = self._hashed.get(key)
        running = None
        if hashed is not None and hashed.system_prompt == system_prompt:
            covered = len(hashed.positions)
            if (
                covered <= len(positions)
                and positions[:covered] == hashed.positions
                and edits[:covered] == hashed.edits
            ):
                if covered == len(positions):
                    with self._lock:
                        if self._hashed.get(key) is hashed:
                            self._hashed.move_to_end(key)
                    return hashed.hexdigest
                running = hashed.running.copy()
                feed_rows(running, rows[covered:])
        if running is None:
            running = prefix_hash(format, system_prompt)
            feed_rows(running, rows)
        hexdigest = running.hexdigest()
        self._keep(key, _Hashed(system_prompt, positions, edits, running, hexdigest))
        return hexdigest

    def _keep(self, key: Hashable, hashed: _Hashed) -> None:
        """Keep `hashed` as the window's, in place of the one it had, letting
        the least recently used go while the bounds are passed."""
        size = len(hashed.positions)
        if size > self._messages:
            return
        with self._lock:
            replaced = self._hashed.pop(key, None)
            if replaced is not None:
                self._kept -= len(replaced.positions)
            self._hashed[key] = hashed
            self._kept += size
            while len(self._hashed) > self._windows or self._kept > self._messages:
                _, dropped = self._hashed.popitem(last=False)
                self._kept -= len(dropped.positions)

    def __len__(self) -> int:
        return len(self._hashed)
