"""Tracing: the run's spans of waiting and of its body, in the run's trace.

Trace context crosses the queue inside the message; for a run's trace
(``run_span``) the worker's spans sit beneath the run span, linked to the span that
queued the message. Waiting is drawn afterwards (a span cannot be open across
processes): ``worker.pickup`` from the enqueue to the claim. A claim that starts an
attempt opens the attempt's span (``cronwave.attempt``, recorded when the delivery is
over: its id is fixed by the attempt's number, so the sweeper can record an attempt
whose worker died), and what follows sits beneath it: ``worker.hold`` from the claim
to the fire time of a run claimed ahead, the body's ``worker.execute`` from the fire
time (or now) to its end, with the fire lateness the body saw
(``cronwave.lateness_ms``) and, when measurable, the hand-over to the body before its
first statement (``job.start``), then the completion.

When this delivery's completion (or dead letter) ended the run, the run span is
recorded last, once the completion is durable and the run's status cached: the run's
last span to end.

A run its schedule's ``trace_sample`` left out (``run_span.run_sampled``) is still
recorded here, into the process's deferred spans (``telemetry.deferred``), and when
the delivery is over its spans, with those its job process held of the body
(``worker.job_spans``), are exported if the run turned out to matter, and dropped if
not (``keep_reason``): it failed, timed out or was cancelled, was
dead-lettered, released or retried (an attempt after the first), it had not succeeded
by its deadline (``Delivery.deadline_at``, from the claim's answer), or its body started
later than ``keep_late`` after its fire time. The attempt's and the run's span then say
why (``cronwave.trace.kept``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from cronwave_proto.v1 import common_pb2
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN_CONTEXT, Link, Status, StatusCode
from prometheus_client import Counter

from cronwave_core.domain.instants import epoch_ns
from cronwave_core.telemetry import span_wire
from cronwave_core.telemetry.deferred import DeferredSpans
from cronwave_core.telemetry.propagation import extracted_context
from cronwave_core.telemetry.run_span import (
    attempt_context,
    record_attempt_span,
    record_run_span,
    run_context,
    run_sampled,
)
from cronwave_core.telemetry.spans import tracer
from cronwave_core.telemetry.vocabulary import (
    ATTR_FIRE_TIME,
    ATTR_HOLD,
    ATTR_HOP,
    ATTR_KIND,
    ATTR_QUEUE,
    ATTR_RUN_ID,
    ATTR_RUN_STATE,
    ATTR_TRIGGER,
    ATTR_WORKER_ID,
    HOLD_KIND,
    RUN_HOP,
    Hop,
    Kind,
    run_attributes,
)
from worker.chain import Delivery, RunMiddleware
from worker.supervisor import AttemptResult, Outcome

log = logging.getLogger("cronwave.worker")

ATTR_LATENESS_MS = "cronwave.lateness_ms"
ATTR_JOB_TYPE = "cronwave.job_type"
ATTR_ATTEMPT = "cronwave.attempt"
ATTR_OUTCOME = "cronwave.outcome"
ATTR_OVERHEAD_MS = "cronwave.job_process.overhead_ms"
#: Why the spans of a run that was not sampled were kept (``keep_reason``).
ATTR_TRACE_KEPT = "cronwave.trace.kept"
#: A hand-over to the body shorter than this is not drawn as ``job.start``.
JOB_START_MIN_NS = 1_000_000
#: What became of the worker's spans of each delivery of a run not sampled.
UNSAMPLED = Counter(
    "cronwave_unsampled_deliveries",
    "Deliveries of runs their schedule's trace_sample left out, by what became of the "
    "worker's spans (decision=dropped, or the reason they were kept: failed, retried, "
    "late, ...)",
    ["decision"],
)
#: The outcomes of an attempt whose run's spans are kept, sampled or not.
_KEPT_OUTCOMES = {
    Outcome.FAILED: "failed",
    Outcome.TIMED_OUT: "timed_out",
    Outcome.CANCELLED: "cancelled",
    Outcome.RELEASED: "released",
}


class Tracing(RunMiddleware):
    """``deferred``: where this process holds the spans of runs not sampled (None:
    it records none); ``keep_late``: a run not sampled whose body started later than
    this after its fire time is kept (None: lateness keeps none)."""

    def __init__(
        self,
        worker_id: str,
        deferred: DeferredSpans | None = None,
        keep_late: timedelta | None = timedelta(seconds=1),
    ) -> None:
        self.worker_id = worker_id
        self.deferred = deferred
        self._keep_late_ns = (
            None if keep_late is None else keep_late // timedelta(microseconds=1) * 1000
        )

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
        sender = trace.get_current_span().get_span_context()
        in_run = run_context(sender.trace_id) if sender.is_valid else None
        if in_run is not None:  # the worker's spans sit beneath the run span
            delivery.sender = sender
            delivery.stack.enter_context(_attached(in_run))

    def after_pickup(self, delivery: Delivery) -> None:
        """The time the message waited in the broker, up to now."""
        message = delivery.message
        now_ns = time.time_ns()
        start = message.enqueued_at_ns if 0 < message.enqueued_at_ns <= now_ns else now_ns
        sender = delivery.sender
        span = tracer("cronwave").start_span(
            "worker.pickup",
            start_time=start,
            attributes={ATTR_HOP: Hop.PICKUP, ATTR_KIND: Kind.QUEUE, **delivery.attrs},
            links=[Link(sender)] if sender.is_valid else None,
        )
        span.set_attributes(delivery.pickup_marks)
        span.end(end_time=now_ns)

    def after_claim(self, delivery: Delivery) -> None:
        """The claim began an attempt (its span's time begins)."""
        if delivery.sender.is_valid and delivery.run.run_id:
            delivery.attempt_began_ns = time.time_ns()

    def _enter_attempt(self, delivery: Delivery) -> None:
        """From here on the attempt's spans sit beneath the attempt's span. Entered as
        its execute phase begins, before any span of the phase is current: a context
        attached inside a phase's span would be undone when that span ends."""
        if not delivery.attempt_began_ns:
            return
        context = attempt_context(delivery.sender.trace_id, delivery.run.attempt)
        if context is not None:
            delivery.stack.enter_context(_attached(context))

    def after_delivery(self, delivery: Delivery) -> None:
        """The attempt's span is recorded, and the run span when this delivery ended
        the run."""
        try:
            self._record(delivery)
        except Exception:  # tracing never fails a run
            log.exception("run %s: its attempt's spans not recorded", delivery.message.run_id)

    def _record(self, delivery: Delivery) -> None:
        began, sender = delivery.attempt_began_ns, delivery.sender
        if not sender.is_valid:
            return
        delivery.sender = INVALID_SPAN_CONTEXT  # once
        trace_id, result = sender.trace_id, delivery.result
        deferred = None if run_sampled(trace_id) else self.deferred
        kept = self.keep_reason(delivery) if deferred is not None else None
        try:
            # A superseded attempt was found lost, and recorded so, by the sweeper.
            if began and (result is None or result.outcome is not Outcome.SUPERSEDED):
                attributes = dict(delivery.attrs)
                if result is not None:
                    attributes[ATTR_OUTCOME] = result.outcome.value
                if kept:
                    attributes[ATTR_TRACE_KEPT] = kept
                record_attempt_span(trace_id, delivery.run.attempt, began, attributes)
            self._record_run(delivery, trace_id, kept)
        finally:
            if deferred is not None:
                if kept:
                    _hold_job_spans(deferred, trace_id, result)
                    deferred.keep(trace_id)
                else:
                    deferred.drop(trace_id)
                UNSAMPLED.labels(kept or "dropped").inc()

    def _record_run(self, delivery: Delivery, trace_id: int, kept: str | None) -> None:
        ended = delivery.ended_run
        if ended is None and delivery.poison is not None:
            ended = delivery.poison.ended_run
        if ended is None:
            return
        attributes = {
            **delivery.attrs,
            **run_attributes(ended.run_id, ended.schedule_id, str(delivery.attrs[ATTR_FIRE_TIME])),
            ATTR_JOB_TYPE: ended.job_type,
            ATTR_ATTEMPT: ended.attempt,
            ATTR_RUN_STATE: common_pb2.RunState.Name(ended.state).removeprefix("RUN_STATE_"),
        }
        attributes.pop(ATTR_WORKER_ID, None)  # the run's, not one worker's
        if kept:
            attributes[ATTR_TRACE_KEPT] = kept
        record_run_span(trace_id, attributes)

    def keep_reason(self, delivery: Delivery) -> str | None:
        """Why the spans of this delivery's run, not sampled, are kept: ``failed``,
        ``timed_out``, ``cancelled``, ``released``, ``dead_lettered``, ``retried``,
        ``ended_<state>`` (its run ended other than SUCCEEDED), ``deadline`` (it had not
        succeeded by its deadline: ended after it, or is still going then) or ``late``;
        None when nothing about it calls for them (they are dropped)."""
        result = delivery.result
        if result is not None and result.outcome in _KEPT_OUTCOMES:
            return _KEPT_OUTCOMES[result.outcome]
        if delivery.poison is not None and delivery.run.run_id:
            return "dead_lettered"
        if delivery.run.attempt > 1:
            return "retried"
        ended = delivery.ended_run
        if ended is not None and ended.state != common_pb2.RUN_STATE_SUCCEEDED:
            return (
                "ended_" + common_pb2.RunState.Name(ended.state).removeprefix("RUN_STATE_").lower()
            )
        deadline = delivery.deadline_at
        if deadline is not None:
            if ended is not None and ended.HasField("finished_at"):
                ended_ns = ended.finished_at.ToNanoseconds()
            else:  # the run goes on, or another call ended it: not before now
                ended_ns = time.time_ns()
            if ended_ns > epoch_ns(deadline):
                return "deadline"
        limit = self._keep_late_ns
        started = result.body_started_ns if result is not None else 0
        if limit is not None and started and started - epoch_ns(delivery.fire_time) > limit:
            return "late"
        return None

    def before_execute(self, delivery: Delivery) -> None:
        self._enter_attempt(delivery)
        run = delivery.run
        attributes: dict[str, Any] = {
            **delivery.attrs,
            ATTR_HOP: Hop.EXECUTE,
            ATTR_KIND: Kind.APP,
            ATTR_JOB_TYPE: run.job_type,
            ATTR_ATTEMPT: run.attempt,
        }
        start = _held_until(delivery.fire_time, delivery.attrs)
        spans: list[Any] = []
        # Ended here rather than by its context (which exits first and records an
        # error on it): a run released while it waited for its fire time ends before
        # that start, and a span never ends before it begins.
        delivery.phase.callback(
            lambda: [span.end(end_time=max(time.time_ns(), start)) for span in spans]
        )
        delivery.span = delivery.phase.enter_context(
            tracer("cronwave").start_as_current_span(
                "worker.execute", attributes=attributes, start_time=start, end_on_exit=False
            )
        )
        spans.append(delivery.span)

    def after_execute(self, delivery: Delivery) -> None:
        result, span = delivery.result, delivery.span
        if result is None:
            return
        if result.body_started_ns:
            lateness_ms = (result.body_started_ns - epoch_ns(delivery.fire_time)) / 1e6
            span.set_attribute(ATTR_LATENESS_MS, lateness_ms)
            _draw_job_start(span, result.body_started_ns)
        if result.overhead_ns:
            span.set_attribute(ATTR_OVERHEAD_MS, result.overhead_ns / 1e6)
        span.set_attribute(ATTR_OUTCOME, result.outcome.value)
        if result.error:
            span.set_status(Status(StatusCode.ERROR, result.error))


def _hold_job_spans(deferred: DeferredSpans, trace_id: int, result: AttemptResult | None) -> None:
    """The spans the attempt's job process held of its body (``worker.job_spans``),
    held with the run's other spans to be kept with them. Made spans again only here:
    a run dropped costs the worker no more than the JSON it read."""
    if result is None or not result.job_spans:
        return
    resource = getattr(trace.get_tracer_provider(), "resource", None)
    for span in span_wire.decode(trace_id, list(result.job_spans), resource):
        deferred.on_end(span)


def _held_until(fire_time: datetime, attrs: Mapping[str, Any]) -> int:
    """When the attempt's ``execute`` time begins: now, or the fire time for a run
    that waits for it (claimed ahead, the dispatch lead). The wait is a span of its
    own, ``worker.hold``, which belongs to no hop (its hop is the run's, its kind
    ``hold``): it is the schedule, not latency."""
    now_ns, fire_ns = time.time_ns(), epoch_ns(fire_time)
    if fire_ns <= now_ns:
        return now_ns
    hold = tracer("cronwave").start_span(
        "worker.hold",
        attributes={
            **attrs,
            ATTR_HOP: RUN_HOP,
            ATTR_KIND: HOLD_KIND,
            ATTR_HOLD: "fire_time",
        },
        start_time=now_ns,
    )
    hold.end(end_time=fire_ns)
    return fire_ns


def _draw_job_start(execute: Any, body_started_ns: int) -> None:
    """``job.start``: the execute span's time before the body's first statement (its
    thread or job process handed the run, the job's module loaded), when measurable."""
    begun = getattr(execute, "start_time", None)
    if not isinstance(begun, int) or body_started_ns - begun < JOB_START_MIN_NS:
        return
    attributes = {ATTR_HOP: Hop.EXECUTE, ATTR_KIND: Kind.APP}
    run_id = getattr(execute, "attributes", {}).get(ATTR_RUN_ID)
    if run_id:
        attributes[ATTR_RUN_ID] = run_id
    span = tracer("cronwave").start_span(
        "job.start",
        trace.set_span_in_context(execute),
        attributes=attributes,
        start_time=begun,
    )
    span.end(end_time=body_started_ns)


@contextmanager
def _attached(context: otel_context.Context) -> Iterator[None]:
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)
