"""Processing one queued run: pickup, claim, execute, complete.

A message is only a pointer to a run. The store's claim decides whether this worker
may run it (exactly one live attempt per run); a message for a run that is already
terminal or held by a live attempt is acknowledged and dropped, which is what makes
at-least-once delivery run a job once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from cronwave.v1 import common_pb2
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave_core.convert import ts_to_dt
from cronwave_core.queueing import RunMessage
from cronwave_core.telemetry import (
    ATTR_HOP,
    ATTR_KIND,
    extracted_context,
    hop_span,
    run_attributes,
)
from worker.jobs import JobContext, Registry
from worker.supervisor import AttemptResult, BeatResult, Outcome, Supervisor, describe

log = logging.getLogger("cronwave.worker")

T = TypeVar("T")

ATTR_LATENESS_MS = "cronwave.lateness_ms"
ATTR_JOB_TYPE = "cronwave.job_type"
ATTR_ATTEMPT = "cronwave.attempt"
ATTR_OUTCOME = "cronwave.outcome"

# Calls whose failure says nothing about the run: the store is restarting or slow.
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# Calls whose failure says the attempt is no longer this worker's to finish.
_NOT_OURS = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)

_STATE = {
    Outcome.SUCCEEDED: common_pb2.RUN_STATE_SUCCEEDED,
    Outcome.FAILED: common_pb2.RUN_STATE_FAILED,
    Outcome.TIMED_OUT: common_pb2.RUN_STATE_TIMED_OUT,
}


class WorkerStats:
    """Counters for ``GetWorkerStatus``; safe to update from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.runs_started = 0
        self.runs_finished = 0
        self.busy = 0

    def started(self) -> None:
        with self._lock:
            self.runs_started += 1
            self.busy += 1

    def finished(self) -> None:
        with self._lock:
            self.runs_finished += 1
            self.busy -= 1

    def snapshot(self) -> tuple[int, int, int]:
        with self._lock:
            return self.runs_started, self.runs_finished, self.busy


def with_retries(
    call: Callable[[], T],
    what: str,
    attempts: int = 6,
    first_delay: float = 0.1,
    max_delay: float = 2.0,
) -> T:
    """``call()``, retried with backoff while the store is unreachable; any other
    error, or the last unreachable one, propagates."""
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() not in _TRANSIENT or attempt == attempts:
                raise
            log.warning(
                "%s: %s (%s); retry %d/%d", what, exc.code().name, exc.details(), attempt, attempts
            )
            time.sleep(delay)
            delay = min(delay * 2, max_delay)
    raise AssertionError("unreachable")  # the loop returns or raises


class RunProcessor:
    """Turns one run message into at most one completed attempt."""

    def __init__(
        self,
        store: Any,  # WorkflowStoreServiceStub
        registry: Registry,
        worker_id: str,
        stats: WorkerStats,
    ) -> None:
        self.store = store
        self.registry = registry
        self.worker_id = worker_id
        self.stats = stats

    def process(self, kwargs: Mapping[str, Any]) -> None:
        """Handle the message's kwargs. An undecodable message raises (the broker
        dead-letters it); a run that is not ours to run is skipped."""
        message = RunMessage.from_kwargs(kwargs)
        with extracted_context(message.trace):
            attrs = run_attributes(
                message.run_id, message.schedule_id, message.fire_time.isoformat()
            )
            self._record_pickup(message, attrs)
            with hop_span("worker.claim", "pickup", "app", attrs) as span:
                claim = with_retries(
                    lambda: self.store.ClaimRun(
                        store_pb.ClaimRunRequest(run_id=message.run_id, worker_id=self.worker_id)
                    ),
                    f"claim run {message.run_id}",
                )
                span.set_attribute("cronwave.claimed", claim.claimed)
            if not claim.claimed:
                log.info(
                    "run %s not claimed (state %s): already done or held by a live attempt",
                    message.run_id,
                    common_pb2.RunState.Name(claim.run.state),
                )
                return
            self.stats.started()
            try:
                self._execute(claim.run, claim.attempt_token, attrs)
            finally:
                self.stats.finished()

    def _record_pickup(self, message: RunMessage, attrs: Mapping[str, str]) -> None:
        """The time the message waited in the broker, as a span from the enqueue to
        now (a span cannot be open across processes, so it is drawn afterwards)."""
        now_ns = time.time_ns()
        start = message.enqueued_at_ns if 0 < message.enqueued_at_ns <= now_ns else now_ns
        span = trace.get_tracer("cronwave").start_span(
            "worker.pickup",
            start_time=start,
            attributes={
                ATTR_HOP: "pickup",
                ATTR_KIND: "queue",
                **attrs,
                "cronwave.queue": message.queue,
            },
        )
        span.end(end_time=now_ns)

    def _execute(self, run: common_pb2.Run, attempt_token: int, attrs: Mapping[str, str]) -> None:
        fire_time = ts_to_dt(run.fire_time)
        with hop_span(
            "worker.execute",
            "execute",
            "app",
            {**attrs, ATTR_JOB_TYPE: run.job_type, ATTR_ATTEMPT: run.attempt},
        ) as span:
            result = self._attempt(run, attempt_token, fire_time)
            if result.body_started_ns:
                lateness_ms = (result.body_started_ns - _epoch_ns(fire_time)) / 1e6
                span.set_attribute(ATTR_LATENESS_MS, lateness_ms)
            span.set_attribute(ATTR_OUTCOME, result.outcome.value)
            if result.error:
                span.set_status(Status(StatusCode.ERROR, result.error))
        if result.outcome is Outcome.SUPERSEDED:
            log.warning(
                "run %s attempt %d: superseded by a newer attempt; not completing",
                run.run_id,
                run.attempt,
            )
            return
        request = store_pb.CompleteRunRequest(
            run_id=run.run_id,
            attempt_token=attempt_token,
            state=_STATE[result.outcome],
            error=result.error,
            result_json=json.dumps(result.result) if result.outcome is Outcome.SUCCEEDED else "",
        )
        with hop_span("worker.complete", "complete", "app", attrs) as span:
            try:
                response = with_retries(
                    lambda: self.store.CompleteRun(request), f"complete run {run.run_id}"
                )
            except grpc.RpcError as exc:
                if exc.code() not in _NOT_OURS:
                    raise
                log.warning("run %s: completion refused: %s", run.run_id, exc.details())
                span.set_attribute("cronwave.completed", False)
                return
            span.set_attribute("cronwave.completed", response.changed)
        log.info(
            "run %s (%s) attempt %d: %s%s",
            run.run_id,
            run.job_type,
            run.attempt,
            result.outcome.value,
            f" ({result.error})" if result.error else "",
        )

    def _attempt(
        self, run: common_pb2.Run, attempt_token: int, fire_time: datetime
    ) -> AttemptResult:
        try:
            job_type = self.registry.get(run.job_type)
            payload = _json_object(run.payload_json, "payload_json")
            checkpoint = _json_object(run.checkpoint_json, "checkpoint_json")
        except Exception as exc:  # the run cannot start here; record why
            return AttemptResult(Outcome.FAILED, error=describe(exc))

        def beat(checkpoint_json: str) -> BeatResult:
            try:
                self.store.Heartbeat(
                    store_pb.HeartbeatRequest(
                        run_id=run.run_id,
                        attempt_token=attempt_token,
                        checkpoint_json=checkpoint_json,
                    )
                )
            except grpc.RpcError as exc:
                if exc.code() in _NOT_OURS:
                    log.warning("run %s: heartbeat refused: %s", run.run_id, exc.details())
                    return BeatResult.SUPERSEDED
                return BeatResult.FAILED
            return BeatResult.OK

        supervisor = Supervisor(
            beat,
            heartbeat_interval=job_type.heartbeat_interval,
            duration_limit=job_type.duration_limit,
            run_id=run.run_id,
        )
        ctx = JobContext(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            fire_time=fire_time,
            attempt=run.attempt,
            payload=payload,
            checkpoint=checkpoint,
            job_type=run.job_type,
            on_heartbeat=supervisor.on_heartbeat,
        )
        return supervisor.run(job_type.fn, ctx)


def _json_object(text: str, field: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"run.{field} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"run.{field} must be a JSON object, got {type(value).__name__}")
    return value


def _epoch_ns(dt: datetime) -> int:
    delta = dt.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
