"""Prometheus metrics of a service process: the ``/metrics`` endpoint and bounded labels.

The endpoint is started by the bootstrap (``cronwave_core.bootstrap``), once per
process, on ``CRONWAVE_METRICS_ADDR``; unset, a process serves no metrics. Each
service declares its own metrics in its ``metrics`` module, so a process exposes only
what it can see.

Cost: an observation is a counter or histogram update (the library's own lock per
child, no I/O). Label values that come from users (schedule ids, job types, reasons)
go through a ``BoundedLabel``: past its cap every new value is counted as ``_other``,
so a process's series stay bounded whatever its clients send.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, disable_created_metrics, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger("cronwave")

#: What a label value past its cap is counted as.
OTHER = "_other"
#: Distinct schedules a process labels its series with; later ones are ``_other``.
SCHEDULE_CAP = 10_000
#: Distinct job types, pools and reasons; later ones are ``_other``.
SMALL_CAP = 200
#: Longest label value kept; a longer one is ``_other`` (label values are user text).
MAX_VALUE = 200


class BoundedLabel:
    """The values of one label, at most ``cap`` distinct ones per process.

    ``fold`` is lock-free for a value already seen (a set lookup); only a value new to
    the process takes the lock, once."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def fold(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(value) > MAX_VALUE:
            return OTHER
        with self._lock:
            if value in self._seen:
                return value
            if len(self._seen) >= self.cap:
                return OTHER
            self._seen.add(value)
            return value


def schedules() -> BoundedLabel:
    return BoundedLabel(SCHEDULE_CAP)


def small() -> BoundedLabel:
    return BoundedLabel(SMALL_CAP)


@dataclass
class MetricsServer:
    """A started ``/metrics`` endpoint; ``stop`` is safe to call twice."""

    address: str
    _server: Any

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


def serve_metrics(address: str) -> MetricsServer:
    """Serve the process's registry at ``http://ADDRESS/metrics`` from a daemon
    thread. Raises ``OSError`` ("Address already in use") when the port is taken."""
    host, _, port = address.rpartition(":")
    # No ``*_created`` series: a third of the series, which no dashboard here reads.
    disable_created_metrics()
    server, _thread = start_http_server(int(port), addr=host)
    log.info("metrics on http://%s/metrics", address)
    return MetricsServer(address, server)


class CachedGauges(Collector):
    """Gauges computed on scrape by ``collect`` (one query, say), at most once per
    ``ttl_seconds``: a scrape every second costs the service one query per ttl. A
    failing ``collect`` yields the last values and is logged."""

    def __init__(
        self,
        collect: Callable[[], list[GaugeMetricFamily]],
        ttl_seconds: float = 5.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self._collect = collect
        self._ttl = ttl_seconds
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._last: list[GaugeMetricFamily] = []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = self._clock()
            if now - self._at >= self._ttl:
                try:
                    self._last = self._collect()
                except Exception:
                    log.warning("metrics: collecting gauges failed", exc_info=True)
                self._at = now
            yield from self._last

    def describe(self) -> Iterator[Metric]:
        return iter(())


def register(collector: Collector) -> None:
    REGISTRY.register(collector)
