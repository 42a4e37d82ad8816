"""A fresh, migrated database for one benchmark run, on DATABASE_URL's
server or the embedded one, dropped afterwards."""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import make_url

from store import migrate
from store.db import create_database_if_missing, drop_database, make_sync_engine
from store.runtime import open_database
from store.settings import Settings


@contextmanager
def bench_database(settings: Settings) -> Iterator[str]:
    """Yield the SQLAlchemy URL of a new migrated database; drop it at the end."""
    with open_database(settings) as server:
        name = f"convo_bench_{uuid.uuid4().hex[:8]}"
        create_database_if_missing(server.url, name)
        url = make_url(server.url).set(database=name).render_as_string(hide_password=False)
        engine = make_sync_engine(url, settings)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        try:
            yield url
        finally:
            drop_database(server.url, name)


async def time_each(action: Callable[[int], Awaitable[object]], repeats: int) -> list[float]:
    """Seconds taken by each of `repeats` calls of `action(i)`."""
    samples = []
    for i in range(repeats):
        started = time.perf_counter()
        await action(i)
        samples.append(time.perf_counter() - started)
    return samples


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000
