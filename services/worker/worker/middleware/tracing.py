"""Tracing: the run's spans of waiting and of its body, in the message's trace.

Trace context crosses the queue inside the message; it is entered for the whole
delivery, so every span the chain draws is the run's. Waiting is drawn afterwards
(a span cannot be open across processes): ``worker.pickup`` from the enqueue to the
claim, ``worker.hold`` from the claim to the fire time of a run claimed ahead. The
body is ``worker.execute``, from the fire time (or now) to its end, with the fire
lateness the body saw (``cronwave.lateness_ms``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from opentelemetry.trace import Status, StatusCode

from cronwave_core.domain.instants import epoch_ns
from cronwave_core.telemetry.propagation import extracted_context
from cronwave_core.telemetry.spans import tracer
from cronwave_core.telemetry.vocabulary import (
    ATTR_HOLD,
    ATTR_HOP,
    ATTR_KIND,
    ATTR_QUEUE,
    ATTR_TRIGGER,
    ATTR_WORKER_ID,
    Hop,
    Kind,
    run_attributes,
)
from worker.chain import Delivery, RunMiddleware

ATTR_LATENESS_MS = "cronwave.lateness_ms"
ATTR_JOB_TYPE = "cronwave.job_type"
ATTR_ATTEMPT = "cronwave.attempt"
ATTR_OUTCOME = "cronwave.outcome"
ATTR_OVERHEAD_MS = "cronwave.job_process.overhead_ms"


class Tracing(RunMiddleware):
    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id

    def before_pickup(self, delivery: Delivery) -> None:
        message = delivery.message
        delivery.stack.enter_context(extracted_context(message.trace))
        delivery.attrs = {
            **run_attributes(message.run_id, message.schedule_id, message.fire_time.isoformat()),
            ATTR_JOB_TYPE: message.job_type,
            ATTR_QUEUE: message.queue,
            ATTR_WORKER_ID: self.worker_id,
        }
        if message.trigger:
            delivery.attrs[ATTR_TRIGGER] = message.trigger

    def after_pickup(self, delivery: Delivery) -> None:
        """The time the message waited in the broker, up to now."""
        message = delivery.message
        now_ns = time.time_ns()
        start = message.enqueued_at_ns if 0 < message.enqueued_at_ns <= now_ns else now_ns
        span = tracer("cronwave").start_span(
            "worker.pickup",
            start_time=start,
            attributes={ATTR_HOP: Hop.PICKUP, ATTR_KIND: Kind.QUEUE, **delivery.attrs},
        )
        span.set_attributes(delivery.pickup_marks)
        span.end(end_time=now_ns)

    def before_execute(self, delivery: Delivery) -> None:
        run = delivery.run
        attributes: dict[str, Any] = {
            **delivery.attrs,
            ATTR_HOP: Hop.EXECUTE,
            ATTR_KIND: Kind.APP,
            ATTR_JOB_TYPE: run.job_type,
            ATTR_ATTEMPT: run.attempt,
        }
        delivery.span = delivery.phase.enter_context(
            tracer("cronwave").start_as_current_span(
                "worker.execute",
                attributes=attributes,
                start_time=_held_until(delivery.fire_time, delivery.attrs),
            )
        )

    def after_execute(self, delivery: Delivery) -> None:
        result, span = delivery.result, delivery.span
        if result is None:
            return
        if result.body_started_ns:
            lateness_ms = (result.body_started_ns - epoch_ns(delivery.fire_time)) / 1e6
            span.set_attribute(ATTR_LATENESS_MS, lateness_ms)
        if result.overhead_ns:
            span.set_attribute(ATTR_OVERHEAD_MS, result.overhead_ns / 1e6)
        span.set_attribute(ATTR_OUTCOME, result.outcome.value)
        if result.error:
            span.set_status(Status(StatusCode.ERROR, result.error))


def _held_until(fire_time: datetime, attrs: Mapping[str, Any]) -> int:
    """When the attempt's ``execute`` time begins: now, or the fire time for a run
    that waits for it (claimed ahead, the dispatch lead). The wait is a span of its
    own, ``worker.hold``, which belongs to no hop: it is the schedule, not latency."""
    now_ns, fire_ns = time.time_ns(), epoch_ns(fire_time)
    if fire_ns <= now_ns:
        return now_ns
    hold = tracer("cronwave").start_span(
        "worker.hold", attributes={**attrs, ATTR_HOLD: "fire_time"}, start_time=now_ns
    )
    hold.end(end_time=fire_ns)
    return fire_ns
