"""Single-message append latency: the event log vs a raw INSERT + COMMIT.

Both run on the same server in the same run, one after the other, each
preceded by a warm-up. The baseline is the least any durable append can
cost there: one psycopg `INSERT` of the same JSON into a plain table and a
`COMMIT`. The ratio is what the log's guarantees (row lock, version check,
idempotency lookup, constraint checks, NOTIFY, SQLAlchemy) cost on top.
"""

from __future__ import annotations

import asyncio
import json
import uuid

from bench.harness import bench_database, median_ms, time_each
from bench.report import print_table, write_results
from store.db import make_async_engine, raw_connection
from store.log import EventLog
from store.records import NewEvent
from store.settings import Settings

REPEATS = 400
WARMUP = 50
MESSAGE = {"role": "user", "content": "Please refactor the parser and run the tests."}


async def measure(url: str, settings: Settings) -> dict[str, float]:
    engine = make_async_engine(url, settings)
    log = EventLog(engine)
    conversation = uuid.uuid4()

    async def append(i: int) -> None:
        await log.append(
            conversation, [NewEvent(type="message_appended", data={"i": i, **MESSAGE})]
        )

    await time_each(append, WARMUP)
    log_samples = await time_each(append, REPEATS)
    await engine.dispose()

    with raw_connection(url) as conn:
        conn.execute("CREATE TABLE raw_baseline (id bigserial PRIMARY KEY, data jsonb NOT NULL)")
        conn.commit()

        async def insert(i: int) -> None:
            conn.execute(
                "INSERT INTO raw_baseline (data) VALUES (%s)", (json.dumps({"i": i, **MESSAGE}),)
            )
            conn.commit()

        await time_each(insert, WARMUP)
        raw_samples = await time_each(insert, REPEATS)

    log_ms, raw_ms = median_ms(log_samples), median_ms(raw_samples)
    return {
        "event_log_append_median_ms": log_ms,
        "raw_insert_commit_median_ms": raw_ms,
        "ratio_log_to_raw": log_ms / raw_ms,
        "repeats": REPEATS,
    }


def main() -> None:
    settings = Settings.from_env()
    with bench_database(settings) as url:
        figures = asyncio.run(measure(url, settings))
    write_results("append_latency", figures, notes=__doc__ or "")
    print_table(
        "single-message append latency (median)",
        ["event log ms", "raw INSERT+COMMIT ms", "ratio"],
        [
            [
                figures["event_log_append_median_ms"],
                figures["raw_insert_commit_median_ms"],
                figures["ratio_log_to_raw"],
            ]
        ],
    )


if __name__ == "__main__":
    main()
