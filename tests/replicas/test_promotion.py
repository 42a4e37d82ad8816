"""A standby promoted after its primary fails loses no acknowledged write,
when it is a synchronous standby (`synchronous_standby_names`: a commit is
acknowledged once the standby has it on disk; docs/operations.md, "Read
replicas")."""

from __future__ import annotations

import asyncio

import pytest

from bench.standby import standby_pair, why_not_available
from hosting.settings import Settings
from store import Message, Repository
from store.domain.errors import StorageFailure
from store.postgres import PostgresStorage
from tests.replicas.conftest import migrated

pytestmark = [pytest.mark.slow]


async def test_promoting_a_synchronous_standby_keeps_every_acknowledged_append(
    settings: Settings,
) -> None:
    reason = why_not_available()
    if reason is not None:
        pytest.skip(reason)
    with standby_pair(migrate=migrated(settings)) as pair:
        pair.primary.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        pair.primary.execute("SELECT pg_reload_conf()")
        for _ in range(100):
            if pair.primary.execute("SELECT sync_state FROM pg_stat_replication") == [("sync",)]:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the standby never became synchronous")
        acknowledged: dict[str, list[str]] = {}
        async with PostgresStorage.connect(
            pair.primary.url("convo"), replicas=[pair.standby.url("convo")], timeout=2.0
        ) as storage:
            repo = Repository(storage, tenant="acme")
            cids = [(await repo.create_conversation(f"sync-{i}")).id for i in range(6)]
            for cid in cids:
                acknowledged[cid] = []
            started = asyncio.Event()

            async def writer(cid: str) -> None:
                n = 0
                while True:
                    n += 1
                    text = f"{cid}-{n}"
                    try:
                        await repo.append_messages(cid, [Message(role="user", content=text)])
                    except StorageFailure:
                        return  # the primary is gone: this one was never acknowledged
                    acknowledged[cid].append(text)
                    if n == 5:
                        started.set()

            writers = [asyncio.create_task(writer(cid)) for cid in cids]
            await started.wait()
            await asyncio.sleep(0.3)
            # The primary fails (no shutdown checkpoint, no goodbye), mid-load.
            await asyncio.to_thread(pair.primary.stop, "immediate")
            await asyncio.wait_for(asyncio.gather(*writers), timeout=30)
        await asyncio.to_thread(pair.standby.promote)
        assert pair.standby.execute("SELECT pg_is_in_recovery()") == [(False,)]
        assert sum(map(len, acknowledged.values())) >= 30
        async with PostgresStorage.connect(pair.standby.url("convo")) as promoted:
            survivor = Repository(promoted, tenant="acme")
            for cid, texts in acknowledged.items():
                stored = [m.content for m in await survivor.read_messages(cid, limit=1000)]
                # Every acknowledged append is there, in order; an append
                # cut off mid-flight may be there too (it committed, its
                # answer was lost), nothing else.
                assert stored[: len(texts)] == texts
                assert len(stored) <= len(texts) + 1
            # The promoted server takes writes.
            await survivor.append_messages(cids[0], [Message(role="user", content="after")])
