"""The commit position a write records for the replicas (`replicas.COMMIT_LSN`)
is where a standby's replay stops after that write: when the WAL ends exactly
at a page's end, the insert position is already past the next page's header,
and a standby that has replayed everything must not look behind."""

from __future__ import annotations

import psycopg
import pytest

from store.postgres.replicas import COMMIT_LSN
from store.postgres.urls import libpq_url

pytestmark = pytest.mark.integration

INSERT_POSITION = "(pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint"
BLOCK = 8192
SEGMENT = 16 * 1024 * 1024


@pytest.mark.parametrize(
    ("insert_position", "recorded"),
    [
        (5 * SEGMENT + 40, 5 * SEGMENT),  # past a segment's first (long) header
        (5 * SEGMENT + 3 * BLOCK + 24, 5 * SEGMENT + 3 * BLOCK),  # past a page header
        (5 * SEGMENT + 3 * BLOCK + 200, 5 * SEGMENT + 3 * BLOCK + 200),  # inside a page
        (5 * SEGMENT + 24, 5 * SEGMENT + 24),  # inside a long header: never an end
    ],
)
def test_the_position_steps_back_over_a_page_header(
    database_url: str, insert_position: int, recorded: int
) -> None:
    assert INSERT_POSITION in COMMIT_LSN
    statement = COMMIT_LSN.replace(INSERT_POSITION, f"{insert_position}::bigint")
    with psycopg.connect(libpq_url(database_url)) as conn:
        if conn.execute("SELECT current_setting('wal_block_size')").fetchone() != (str(BLOCK),):
            pytest.skip("a server built with another WAL page size")
        row = conn.execute(
            "SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size'"
        ).fetchone()
        if row != (SEGMENT,):
            pytest.skip("a server initialized with another WAL segment size")
        assert conn.execute(statement).fetchone() == (recorded,)
