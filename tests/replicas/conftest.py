"""A primary and a streaming standby of the tests' own (`bench.standby`),
migrated with alembic, and storages that read from the standby.

The servers are started once per module (a few seconds); a test that
breaks its pair (a promotion) starts its own. Without server binaries, or
as root without a user to run them as, the tests skip saying which."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from api.metrics import Metrics
from bench.standby import StandbyPair, standby_pair, why_not_available
from hosting import migrate
from hosting.settings import Settings
from store.postgres import PostgresStorage

Route = tuple[str, bool]


def migrated(settings: Settings) -> Callable[[str], None]:
    return lambda url: migrate.upgrade_database(url, settings)


@pytest.fixture(scope="module")
def pair(settings: Settings) -> Iterator[StandbyPair]:
    reason = why_not_available()
    if reason is not None:
        pytest.skip(reason)
    with standby_pair(migrate=migrated(settings)) as started:
        yield started


class Watched:
    """A storage on the pair's primary reading from its standby, with the
    HTTP service's metrics listening and every read's route recorded."""

    def __init__(self, storage: PostgresStorage, metrics: Metrics, routes: list[Route]) -> None:
        self.storage, self.metrics, self.routes = storage, metrics, routes

    def skips(self, reason: str) -> float:
        return sum(
            self.metrics.registry.get_sample_value(
                "convo_replica_skipped_total", {"replica": replica.name, "reason": reason}
            )
            or 0.0
            for replica in self.replicas()
        )

    def replicas(self) -> Any:
        assert self.storage.replicas is not None
        return self.storage.replicas.replicas

    def last_route(self) -> Route:
        return self.routes[-1]


@asynccontextmanager
async def watched(pair: StandbyPair, *, max_lag_ms: int = 60_000) -> AsyncIterator[Watched]:
    metrics = Metrics()
    routes: list[Route] = []

    def routed(reader: str, on_replica: bool) -> None:
        routes.append((reader, on_replica))
        metrics.read_routed(reader, on_replica)

    async with PostgresStorage.connect(
        pair.primary.url("convo"),
        replicas=[pair.standby.url("convo")],
        max_replica_lag_ms=max_lag_ms,
        on_replica_skip=metrics.replica_skipped,
        on_read_routed=routed,
    ) as storage:
        yield Watched(storage, metrics, routes)
