"""Where a storage remembers each agent's window (store.postgres.known_batches)."""

from __future__ import annotations

import uuid

from store.postgres.known_batches import KnownBatches
from store.postgres.window_sql import moved_to


def test_a_window_not_remembered_is_read_from_the_first_batch() -> None:
    known = KnownBatches()
    cid = uuid.uuid4()
    assert known.batch(cid, "main") == 1
    known.found(cid, "main", 3)
    assert (known.batch(cid, "main"), known.batch(cid, "helper")) == (3, 1)
    known.found(cid, "main", 1)  # back in the first batch: nothing to keep
    assert known.batch(cid, "main") == 1


def test_the_most_recently_read_windows_are_kept() -> None:
    known = KnownBatches(limit=2)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    known.found(a, "main", 2)
    known.found(b, "main", 3)
    known.found(a, "main", 2)  # read again: the most recent
    known.found(c, "main", 4)
    assert [known.batch(x, "main") for x in (a, b, c)] == [2, 1, 4]


def test_the_row_that_says_where_the_window_went() -> None:
    assert moved_to([(None, None, None, 7)]) == (True, 7)
    assert moved_to([(None, None, None, None)]) == (True, None)
    assert moved_to([]) == (False, None)
    assert moved_to([({"m": 1}, None, 5, None)]) == (False, None)
    assert moved_to([({"m": 1}, None, 5, None), ({"m": 2}, None, 6, None)]) == (False, None)
