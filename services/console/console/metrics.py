"""The console's Prometheus metrics (served at ``CRONWAVE_METRICS_ADDR``, see
``cronwave_core.metrics``): pages served and changes made, by page and status."""

from __future__ import annotations

from prometheus_client import Counter

#: ``page`` is the handler's name (a fixed set), never the URL: schedule and run ids
#: would make the series unbounded.
REQUESTS = Counter(
    "cronwave_console_requests",
    "Requests the console answered, by page (its handler: schedules, run, pause, ...) "
    "and HTTP status",
    ["page", "status"],
)
