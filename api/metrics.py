"""Prometheus metrics (`prometheus_client`), right under `--workers N` too.

`GET /metrics` (no key, like `/health`) answers, in Prometheus' text format:

    convo_http_requests_total{method, route, status}             counter
    convo_http_request_duration_seconds{method, route, status}   histogram
    convo_storage_errors_total{type}                             counter: ConversationBusy,
                                                                 StorageUnavailable, StorageError
    convo_appends_total                                          counter: appends that wrote
    convo_messages_appended_total                                counter: messages they wrote
    convo_compaction_runs_total{dry_run}                         counter: compaction jobs run
    convo_conversations_compacted_total                          counter: batches they started
    convo_rate_limited_total{limit}                              counter: requests refused by a
                                                                 key's rate (requests, bytes)
    convo_quota_refused_total{cap}                               counter: writes refused by a
                                                                 tenant's cap (conversations,
                                                                 stored_bytes)
    convo_feed_lag_seconds                                       gauge: the feed horizon's age
    convo_replica_skipped_total{replica, reason}                 counter: reads a standby could not
                                                                 take (down, not_standby, lagging,
                                                                 failed): the primary answered
    convo_reads_routed_total{reader, server}                     counter: reads by reader (agent,
                                                                 analyst) and server (primary,
                                                                 replica), with replicas configured
    convo_replica_lag_seconds{replica}                           gauge: how far each standby is
                                                                 behind (-1: it does not answer)
    convo_pool_{max,size,in_use,available,requests_waiting}      gauges: the PostgreSQL pools
    convo_pool_{requests_num,requests_errors,connections_errors,connections_lost}_total
                                                                 counters (psycopg_pool's)

`route` is the route's template (`/conversations/{conversation_id}`), never
the path: ids stay out of the labels, so their number stays bounded. A
request no route matched is counted under `route="<unmatched>"`.

One process (`convo serve`): each app has its own registry. Several
(`convo serve --workers N`): `convo serve` gives the workers one directory
in `PROMETHEUS_MULTIPROC_DIR`, each worker's values live in files there,
and a scrape — whichever worker answers it — reads them all
(prometheus_client's multiprocess mode): counters and histograms are summed
over every worker that ever ran, the pool gauges over the live ones, and
the feed lag is the last one measured. The pool's figures are taken every
`POOL_SAMPLE_S` seconds in each worker, and by the worker that answers the
scrape just before.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from starlette.types import Scope

from store.domain.errors import StorageFailure

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

# The text format every Prometheus version reads (generate_latest writes it).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNMATCHED_ROUTE = "<unmatched>"
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
POOL_SAMPLE_S = 2.0

# Seconds: from a cached read to a payload build waiting on a busy pool.
DURATION_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)

# psycopg_pool's statistics exported as gauges (summed over live workers).
POOL_GAUGES: dict[str, str] = {
    "pool_max": "Most connections the pools may open.",
    "pool_size": "Connections open now (in use, idle or being prepared).",
    "pool_in_use": "Connections lent to requests now.",
    "pool_available": "Idle connections now.",
    "requests_waiting": "Requests waiting for a connection now.",
}
# psycopg_pool's counters (absent from its statistics until not 0).
POOL_COUNTERS: dict[str, str] = {
    "requests_num": "Requests for a connection so far.",
    "requests_errors": "Requests for a connection that failed (timeout, closed).",
    "connections_errors": "Failed attempts to open a connection.",
    "connections_lost": "Connections found broken.",
}
STORAGE_ERROR_TYPES = ("ConversationBusy", "StorageUnavailable", "StorageError")


def metric_route(scope: Scope) -> str:
    """The route template the request matched, or `<unmatched>`."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


def multiprocess_mode() -> bool:
    """Whether this process shares its metrics with others (`--workers N`)."""
    return bool(os.environ.get(MULTIPROCESS_DIR_ENV))


class Metrics:
    """The app's metrics; `render()` is the `/metrics` body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "convo_http_requests",
            "HTTP requests answered.",
            ["method", "route", "status"],
            registry=r,
        )
        self.durations = Histogram(
            "convo_http_request_duration_seconds",
            "Time to answer an HTTP request, by route and status.",
            ["method", "route", "status"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.storage_errors = Counter(
            "convo_storage_errors",
            "Storage failures answered to clients, by type.",
            ["type"],
            registry=r,
        )
        for kind in STORAGE_ERROR_TYPES:
            self.storage_errors.labels(kind)
        self.appends = Counter(
            "convo_appends", "Appends that wrote (idempotent replays not).", registry=r
        )
        self.messages_appended = Counter(
            "convo_messages_appended", "Messages written by appends.", registry=r
        )
        self.compaction_runs = Counter(
            "convo_compaction_runs", "Compaction jobs run over HTTP.", ["dry_run"], registry=r
        )
        self.conversations_compacted = Counter(
            "convo_conversations_compacted",
            "Conversations compaction jobs started a batch for.",
            registry=r,
        )
        self.rate_limits_hit = Counter(
            "convo_rate_limited",
            "Requests refused (429) by their API key's rate, by limit.",
            ["limit"],
            registry=r,
        )
        for limit in ("requests", "bytes"):
            self.rate_limits_hit.labels(limit)
        self.quota_refusals = Counter(
            "convo_quota_refused",
            "Writes refused (403) by their tenant's cap, by cap.",
            ["cap"],
            registry=r,
        )
        for cap in ("conversations", "stored_bytes"):
            self.quota_refusals.labels(cap)
        self.feed_lag = Gauge(
            "convo_feed_lag_seconds",
            "How far the global feed's horizon is behind now: the age of the oldest "
            "open transaction (feed readers see nothing newer).",
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.replica_skips = Counter(
            "convo_replica_skipped",
            "Reads a standby could not take, by standby and reason: the primary answered.",
            ["replica", "reason"],
            registry=r,
        )
        self.reads_routed = Counter(
            "convo_reads_routed",
            "Reads by reader (agent, analyst) and the server that answered (primary, replica).",
            ["reader", "server"],
            registry=r,
        )
        self.replica_lag = Gauge(
            "convo_replica_lag_seconds",
            "How far each standby is behind the primary (-1: it does not answer).",
            ["replica"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.pool_gauges = {
            key: Gauge(
                "convo_" + (key if key.startswith("pool_") else f"pool_{key}"),
                help_,
                multiprocess_mode="livesum",
                registry=r,
            )
            for key, help_ in POOL_GAUGES.items()
        }
        self.pool_counters = {
            key: Counter(f"convo_pool_{key}", help_, registry=r)
            for key, help_ in POOL_COUNTERS.items()
        }
        # The labelled children of a (method, route, status), made once.
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        series = self._series.get((method, route, status))
        if series is None:
            labels = (method, route, str(status))
            series = self._series[(method, route, status)] = (
                self.requests.labels(*labels),
                self.durations.labels(*labels),
            )
        series[0].inc()
        series[1].observe(seconds)

    def storage_error(self, error: BaseException) -> None:
        """Count a storage failure answered to a client, by its class."""
        if isinstance(error, StorageFailure):
            self.storage_errors.labels(type(error).__name__).inc()

    def refused(self, error: Exception) -> None:
        """Count a request refused by its key's rate or its tenant's cap."""
        limit = getattr(error, "limit", None)
        if limit is not None:
            self.rate_limits_hit.labels(limit).inc()
        cap = getattr(error, "cap", None)
        if cap is not None:
            self.quota_refusals.labels(cap).inc()

    def appended(self, messages: int) -> None:
        self.appends.inc()
        self.messages_appended.inc(messages)

    def compacted(self, *, dry_run: bool, conversations: int) -> None:
        self.compaction_runs.labels("true" if dry_run else "false").inc()
        if not dry_run:
            self.conversations_compacted.inc(conversations)

    def observe_pool(self, storage: object) -> None:
        """Take the storage's pool figures (nothing without a pool)."""
        pool = getattr(storage, "pool", None)
        if pool is None or not hasattr(pool, "pop_stats"):
            return
        # pop_stats: the counters since the last call, so each is added once.
        stats: Mapping[str, Any] = pool.pop_stats()
        size = stats.get("pool_size", 0)
        available = stats.get("pool_available", 0)
        figures = {**stats, "pool_in_use": max(0, size - available)}
        for key, gauge in self.pool_gauges.items():
            gauge.set(figures.get(key, 0))
        for key, counter in self.pool_counters.items():
            if stats.get(key):
                counter.inc(stats[key])

    def replica_skipped(self, replica: str, reason: str) -> None:
        self.replica_skips.labels(replica, reason).inc()

    def read_routed(self, reader: str, on_replica: bool) -> None:
        self.reads_routed.labels(reader, "replica" if on_replica else "primary").inc()

    def observe_replicas(self, storage: object) -> None:
        """Each standby's lag as the storage last measured it (none: nothing)."""
        replicas = getattr(storage, "replicas", None)
        if replicas is None:
            return
        for replica in replicas.status():
            lag = replica["lag_s"]
            self.replica_lag.labels(replica["name"]).set(-1.0 if lag is None else lag)

    def observe_feed_lag(self, seconds: float) -> None:
        self.feed_lag.set(seconds)

    def render(self) -> bytes:
        if multiprocess_mode():
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return prometheus_client.generate_latest(registry)
        return prometheus_client.generate_latest(self.registry)

    async def sample_pool(self, storage: object) -> None:
        """Take the pool's figures every POOL_SAMPLE_S seconds, until cancelled."""
        while True:
            self.observe_pool(storage)
            await asyncio.sleep(POOL_SAMPLE_S)


def process_ended() -> None:
    """This worker is stopping: its pool gauges leave the sums."""
    if multiprocess_mode():
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
