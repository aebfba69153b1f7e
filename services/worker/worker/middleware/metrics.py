"""Metrics: the fire lateness and the body duration of every attempt whose body ran.

Two histogram observations per attempt, no I/O (``cronwave_core.metrics``). Lateness is
the body's start minus the run's nominal fire time, the figure the run's trace shows as
``cronwave.lateness_ms``; a run started by a trigger has its arrival as fire time. It is
labelled by trigger too, as a catch-up or backfill run is late by design (its slot
passed while nothing could run it, or it is a past slot run again): the lateness alert
judges scheduled slots alone, knowingly.
"""

from __future__ import annotations

import time

from prometheus_client import Histogram

from cronwave_core.domain.instants import epoch_ns
from cronwave_core.metrics import schedules, small
from cronwave_core.queueing import trigger_name
from worker.chain import Delivery, RunMiddleware

_schedule = schedules()
_job_type = small()
_trigger = small()

#: Seconds, from on time to a day late: a nightly job's whole range.
LATENESS_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 86400,
)  # fmt: skip
#: Seconds, from a no-op body to a billing run of hours.
DURATION_BUCKETS = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600,
)  # fmt: skip

LATENESS = Histogram(
    "cronwave_fire_lateness_seconds",
    "Job body start minus the run's nominal fire time, by schedule and trigger (scheduled,"
    " catchup, backfill, manual)",
    ["schedule", "trigger"],
    buckets=LATENESS_BUCKETS,
)
DURATION = Histogram(
    "cronwave_run_duration_seconds",
    "Wall time of an attempt's job body, by job type",
    ["job_type"],
    buckets=DURATION_BUCKETS,
)


class Metrics(RunMiddleware):
    def after_execute(self, delivery: Delivery) -> None:
        result = delivery.result
        if result is None or not result.body_started_ns:
            return
        now_ns = time.time_ns()
        started_ns = result.body_started_ns
        message = delivery.message
        lateness = (started_ns - epoch_ns(delivery.fire_time)) / 1e9
        trigger = trigger_name(delivery.run.trigger) if delivery.run.trigger else message.trigger
        LATENESS.labels(
            _schedule.fold(message.schedule_id or "_none"), _trigger.fold(trigger or "_none")
        ).observe(max(lateness, 0.0))
        DURATION.labels(_job_type.fold(delivery.run.job_type)).observe(
            max(now_ns - started_ns, 0) / 1e9
        )
