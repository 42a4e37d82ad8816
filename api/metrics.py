"""Prometheus metrics, in the text exposition format, without a client library.

`GET /metrics` (no key, like `/health`) answers what one app instance has
counted since it started:

    convo_http_requests_total{method, route, status}        counter
    convo_http_request_duration_seconds{method, route}      histogram
    convo_storage_errors_total{type}                        counter: ConversationBusy,
                                                            StorageUnavailable, StorageError
    convo_appends_total                                     counter: appends that wrote
    convo_messages_appended_total                           counter: messages they wrote
    convo_feed_lag_seconds                                  gauge: the feed horizon's age
    convo_pool_{min,max,size,available,requests_waiting}    gauges: the PostgreSQL pool
    convo_pool_{requests_num,requests_errors,connections_errors,connections_lost}_total
                                                            counters (the pool's); all
                                                            absent on the in-memory storage

`route` is the route's template (`/conversations/{conversation_id}`), never
the path: ids stay out of the labels, so their number stays bounded. A
request no route matched is counted under `route="<unmatched>"`.

One process, one event loop: the counters are plain ints, updated without a
lock. Each app (`api.app.create_app`) has its own `Metrics`, on
`app.state.metrics`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.types import Scope

from store.domain.errors import StorageFailure

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNMATCHED_ROUTE = "<unmatched>"

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

# psycopg_pool's `get_stats()` keys exported as gauges, and what they mean.
POOL_GAUGES: dict[str, str] = {
    "pool_min": "Configured minimum number of connections.",
    "pool_max": "Configured maximum number of connections.",
    "pool_size": "Connections open now (in use, idle or being prepared).",
    "pool_available": "Idle connections now.",
    "requests_waiting": "Requests waiting for a connection now.",
}


def metric_route(scope: Scope) -> str:
    """The route template the request matched, or `<unmatched>`."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(names: tuple[str, ...], values: tuple[str, ...], **extra: str) -> str:
    pairs = [*zip(names, values, strict=True), *extra.items()]
    if not pairs:
        return ""
    return "{" + ",".join(f'{name}="{_escape(value)}"' for name, value in pairs) + "}"


def _number(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class _Histogram:
    __slots__ = ("buckets", "count", "sum")

    def __init__(self, size: int) -> None:
        self.buckets = [0] * size
        self.count = 0
        self.sum = 0.0


class Metrics:
    """The counters of one app; `render()` is the `/metrics` body."""

    def __init__(self, buckets: Iterable[float] = DURATION_BUCKETS) -> None:
        self.buckets = tuple(sorted(buckets))
        self.requests: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        self.durations: dict[tuple[str, str], _Histogram] = {}
        self.storage_errors: defaultdict[str, int] = defaultdict(int)
        self.appends = 0
        self.messages_appended = 0

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests[(method, route, str(status))] += 1
        histogram = self.durations.get((method, route))
        if histogram is None:
            histogram = self.durations[(method, route)] = _Histogram(len(self.buckets))
        histogram.count += 1
        histogram.sum += seconds
        for i, bound in enumerate(self.buckets):
            if seconds <= bound:
                histogram.buckets[i] += 1
                break

    def storage_error(self, error: BaseException) -> None:
        """Count a storage failure answered to a client, by its class."""
        if isinstance(error, StorageFailure):
            self.storage_errors[type(error).__name__] += 1

    def appended(self, messages: int) -> None:
        self.appends += 1
        self.messages_appended += messages

    def render(
        self, pool_stats: Mapping[str, Any] | None = None, feed_lag: float | None = None
    ) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, help_: str) -> None:
            lines.append(f"# HELP {name} {help_}")
            lines.append(f"# TYPE {name} {kind}")

        family("convo_http_requests_total", "counter", "HTTP requests answered.")
        for (method, route, status), count in sorted(self.requests.items()):
            labels = _labels(("method", "route", "status"), (method, route, status))
            lines.append(f"convo_http_requests_total{labels} {count}")

        name = "convo_http_request_duration_seconds"
        family(name, "histogram", "Time to answer an HTTP request, by route.")
        for (method, route), histogram in sorted(self.durations.items()):
            series = (method, route)
            cumulative = 0
            for bound, count in zip(self.buckets, histogram.buckets, strict=True):
                cumulative += count
                labels = _labels(("method", "route"), series, le=_number(bound))
                lines.append(f"{name}_bucket{labels} {cumulative}")
            labels = _labels(("method", "route"), series, le="+Inf")
            lines.append(f"{name}_bucket{labels} {histogram.count}")
            labels = _labels(("method", "route"), series)
            lines.append(f"{name}_sum{labels} {_number(histogram.sum)}")
            lines.append(f"{name}_count{labels} {histogram.count}")

        family(
            "convo_storage_errors_total",
            "counter",
            "Storage failures answered to clients, by type.",
        )
        for kind in ("ConversationBusy", "StorageUnavailable", "StorageError"):
            self.storage_errors.setdefault(kind, 0)
        for kind, count in sorted(self.storage_errors.items()):
            lines.append(f"convo_storage_errors_total{_labels(('type',), (kind,))} {count}")

        family("convo_appends_total", "counter", "Appends that wrote (idempotent replays not).")
        lines.append(f"convo_appends_total {self.appends}")
        family("convo_messages_appended_total", "counter", "Messages written by appends.")
        lines.append(f"convo_messages_appended_total {self.messages_appended}")

        for key, help_ in POOL_GAUGES.items():
            if pool_stats is not None and key in pool_stats:
                gauge = "convo_" + (key if key.startswith("pool_") else f"pool_{key}")
                family(gauge, "gauge", help_)
                lines.append(f"{gauge} {_number(pool_stats[key])}")
        if pool_stats is not None:
            for key, help_ in (
                ("requests_num", "Requests for a connection so far."),
                ("requests_errors", "Requests for a connection that failed (timeout, closed)."),
                ("connections_errors", "Failed attempts to open a connection."),
                ("connections_lost", "Connections found broken."),
            ):
                # psycopg_pool leaves a counter out until it is not 0.
                family(f"convo_pool_{key}_total", "counter", help_)
                lines.append(f"convo_pool_{key}_total {_number(pool_stats.get(key, 0))}")
        if feed_lag is not None:
            family(
                "convo_feed_lag_seconds",
                "gauge",
                "How far the global feed's horizon is behind now: the age of the oldest "
                "open transaction (feed readers see nothing newer).",
            )
            lines.append(f"convo_feed_lag_seconds {_number(feed_lag)}")
        return "\n".join(lines) + "\n"


def pool_stats(storage: object) -> Mapping[str, Any] | None:
    """The storage's connection-pool statistics (psycopg_pool), if it has a pool."""
    pool = getattr(storage, "pool", None)
    get_stats = getattr(pool, "get_stats", None)
    if get_stats is None:
        return None
    stats: Mapping[str, Any] = get_stats()
    return stats
