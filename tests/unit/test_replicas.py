"""The read router's decisions (store.postgres.replicas), without servers:
LSN tokens, how far behind a standby is, which server each read picks, and
what a standby's failure costs a read (nothing but the primary). The same
on real servers: tests/replicas."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from hosting.settings import Settings, SettingsError
from store.domain.errors import ConversationNotFound
from store.postgres import replicas
from store.postgres.replicas import (
    Replica,
    ReplicaSet,
    _PrimaryWal,
    format_lsn,
    parse_lsn,
    read_after,
)

PRIMARY: Any = object()


@pytest.mark.parametrize("lsn", [0, 1, 0xB374D848, (0x16 << 32) | 0xB374D848, (1 << 64) - 1])
def test_an_lsn_reads_back_as_written(lsn: int) -> None:
    assert parse_lsn(format_lsn(lsn)) == lsn


def test_format_is_postgresqls() -> None:
    assert format_lsn((0x16 << 32) | 0xB374D848) == "16/B374D848"


@pytest.mark.parametrize(
    "text",
    ["", "/", "0/", "/0", "16", "1/2/3", "G/0", "123456789/0", "0/-1", "0/ 1", "0/" + "F" * 40],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="LSN"):
        parse_lsn(text)


def test_lag_is_the_time_since_the_primary_first_went_past_the_replay() -> None:
    wal = _PrimaryWal()
    for at, lsn in ((0.0, 100), (1.0, 100), (2.0, 150), (3.0, 200)):
        wal.add(at, lsn, keep_s=10)
    assert wal.lag(200, now=3.5, keep_s=10) == 0.0  # caught up
    assert wal.lag(100, now=3.5, keep_s=10) == 1.5  # missing what came at 2.0
    assert wal.lag(170, now=3.5, keep_s=10) == 0.5
    # Behind since before the oldest sample kept: at least the window.
    assert wal.lag(50, now=3.5, keep_s=10) == 10


def test_old_samples_are_dropped() -> None:
    wal = _PrimaryWal()
    for at in range(10):
        wal.add(float(at), at, keep_s=3)
    assert [at for at, _ in wal.samples] == [6.0, 7.0, 8.0, 9.0]


def _replica(
    name: str, *, replayed: int = 1000, lag_s: float | None = 0.0, **state: Any
) -> Replica:
    replica = Replica(name=name, pool=object(), replayed=replayed, lag_s=lag_s)  # type: ignore[arg-type]
    replica.answered = state.get("answered", True)
    replica.standby = state.get("standby", True)
    return replica


class Router:
    def __init__(self, *standbys: Replica, max_lag_ms: int = 1000) -> None:
        self.skips: list[tuple[str, str]] = []
        self.routes: list[tuple[str, bool]] = []
        self.set = ReplicaSet(
            PRIMARY,
            standbys,
            max_lag_ms=max_lag_ms,
            on_skip=lambda name, reason: self.skips.append((name, reason)),
            on_route=lambda reader, on_replica: self.routes.append((reader, on_replica)),
        )

    async def read(self, reader: Any, cid: uuid.UUID | None = None, fail: Any = None) -> Any:
        async def read(pool: Any) -> Any:
            if pool is not PRIMARY and fail is not None:
                raise fail
            return pool

        return await self.set.read(reader, cid, read)


async def test_analysts_read_near_standbys_in_turn() -> None:
    a, b = _replica("a"), _replica("b")
    router = Router(a, b)
    assert [await router.read("analyst") for _ in range(4)] == [a.pool, b.pool, a.pool, b.pool]
    assert router.routes == [("analyst", True)] * 4


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ({"answered": False}, "down"),
        ({"standby": False}, "not_standby"),
        ({"lag_s": 1.5}, "lagging"),
        ({"lag_s": None}, "lagging"),
    ],
)
async def test_a_standby_that_cannot_is_skipped_and_counted(
    state: dict[str, Any], reason: str
) -> None:
    router = Router(_replica("a", **state))
    assert await router.read("analyst") is PRIMARY
    assert router.skips == [("a", reason)]
    assert router.routes == [("analyst", False)]


async def test_an_agents_read_needs_the_conversations_last_write_replayed() -> None:
    standby = _replica("a", replayed=1000)
    router = Router(standby)
    cid = uuid.uuid4()
    assert await router.read("agent", cid) is PRIMARY  # nothing known: the primary
    router.set.written([cid], 1000)
    assert await router.read("agent", cid) is standby.pool
    router.set.written([cid], 1001)
    assert await router.read("agent", cid) is PRIMARY
    # Far behind the bound, yet past the write: it may answer the agent.
    standby.replayed, standby.lag_s = 2000, 60.0
    assert await router.read("agent", cid) is standby.pool
    assert router.skips == []


async def test_a_token_holds_every_read_to_it() -> None:
    standby = _replica("a", replayed=1000)
    router = Router(standby)
    with read_after(1001):
        assert await router.read("analyst") is PRIMARY
        assert await router.read("agent", uuid.uuid4()) is PRIMARY
    with read_after(999):
        assert await router.read("agent", uuid.uuid4()) is standby.pool
    assert router.skips == []


async def test_a_commit_in_a_block_is_its_token() -> None:
    router = Router(_replica("a"))
    cid = uuid.uuid4()
    router.set.written([cid], 42)
    with read_after() as consistency:
        router.set.committed(cid)
    assert consistency.written == 42
    router.set.committed(cid)  # outside any block: nobody to tell


@pytest.mark.parametrize(
    ("error", "answered", "reason"),
    [
        (psycopg.OperationalError("connection lost"), False, "down"),
        (psycopg.errors.SerializationFailure("conflict with recovery"), True, "failed"),
    ],
)
async def test_a_read_that_fails_on_a_standby_is_read_on_the_primary(
    error: Exception, answered: bool, reason: str
) -> None:
    standby = _replica("a")
    router = Router(standby)
    assert await router.read("analyst", fail=error) is PRIMARY
    assert standby.answered is answered
    assert router.skips == [("a", reason)]
    assert router.routes == [("analyst", False)]


async def test_not_found_on_a_standby_is_asked_of_the_primary() -> None:
    router = Router(_replica("a"))
    cid = uuid.uuid4()
    assert await router.read("analyst", cid, fail=ConversationNotFound(cid)) is PRIMARY
    assert router.skips == []


def test_the_writes_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replicas, "MAX_REMEMBERED", 3)
    router = Router(_replica("a"))
    cids = [uuid.uuid4() for _ in range(5)]
    for n, cid in enumerate(cids):
        router.set.written([cid], n)
    assert [router.set.last_write(cid) for cid in cids] == [None, None, 2, 3, 4]
    router.set.written([cids[4]], 1)  # an older position never replaces a newer
    assert router.set.last_write(cids[4]) == 4


def test_replica_urls_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVO_REPLICA_URLS", " postgresql://u:pw@a/db , postgres://u@b:5433/db ")
    monkeypatch.setenv("CONVO_REPLICA_MAX_LAG_MS", "250")
    settings = Settings.from_env()
    assert settings.replica_urls == ("postgresql://u:pw@a/db", "postgres://u@b:5433/db")
    assert settings.replica_max_lag_ms == 250
    shown = dict((v, s) for v, s, _ in settings.effective())["CONVO_REPLICA_URLS"]
    assert "pw" not in shown
    assert "b:5433" in shown


def test_a_refused_replica_url_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVO_REPLICA_URLS", "mysql://u:secret@a/db")
    with pytest.raises(SettingsError, match="CONVO_REPLICA_URLS") as refused:
        Settings.from_env()
    assert "secret" not in str(refused.value)  # a URL may carry a password
