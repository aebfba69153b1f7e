"""Processing one queued run: pickup, claim, execute, complete.

A message is only a pointer to a run. The store's claim decides whether this worker
may run it (exactly one live attempt per run); a message for a run that is already
terminal or held by a live attempt is acknowledged and dropped, which is what makes
at-least-once delivery run a job once.

A message this worker cannot use (undecodable, naming no run the store knows, or a
job type this worker does not have) is a poison message: it goes to the store's
dead-letter list with the reason, and is acknowledged.

A worker that is stopping (``worker.draining``) claims nothing more: a message that
reaches it goes back on its queue. An attempt it stops is RELEASED: the run goes back
to the store (``ReleaseRun``) with its checkpoint and gets a new message, so another
worker resumes it at once.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import grpc
from dramatiq.brokers.redis import RedisBroker
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from cronwave.v1 import common_pb2
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave_core.batching import Coalescer, ItemRefused, results_of
from cronwave_core.caching import TERMINAL_STATES, RunStatusCache
from cronwave_core.convert import td_to_duration, ts_to_dt
from cronwave_core.faults import NO_FAULTS, FaultHooks, run_key
from cronwave_core.instants import epoch_ns
from cronwave_core.queueing import RunMessage, UndecodableRunMessage
from cronwave_core.telemetry.propagation import extracted_context, inject_context
from cronwave_core.telemetry.spans import hop_span, tracer
from cronwave_core.telemetry.vocabulary import (
    ATTR_FAULT,
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
from worker.draining import AttemptStop, Draining
from worker.drills import NO_DRILLS, DrillHooks
from worker.held_runs import HeldRuns
from worker.isolation import ProcessSupervisor
from worker.job_process import JobProcessPool
from worker.jobs import JobContext, JobType, Registry
from worker.outcome import Action, Decision, decide
from worker.supervisor import AttemptResult, BeatResult, Outcome, Supervisor, describe

log = logging.getLogger("cronwave.worker")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

T = TypeVar("T")

ATTR_LATENESS_MS = "cronwave.lateness_ms"
ATTR_JOB_TYPE = "cronwave.job_type"
ATTR_ATTEMPT = "cronwave.attempt"
ATTR_OUTCOME = "cronwave.outcome"
ATTR_OVERHEAD_MS = "cronwave.job_process.overhead_ms"

# Calls whose failure says nothing about the run: the store is restarting or slow.
TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_TRANSIENT = TRANSIENT
# Calls whose failure says the attempt is no longer this worker's to finish.
_NOT_OURS = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)

_STATE = {
    Outcome.SUCCEEDED: common_pb2.RUN_STATE_SUCCEEDED,
    Outcome.FAILED: common_pb2.RUN_STATE_FAILED,
    Outcome.TIMED_OUT: common_pb2.RUN_STATE_TIMED_OUT,
}

#: A message that arrives more than this before its run's fire time is put back with
#: a delay instead of holding a worker slot until then.
EARLY_LIMIT = timedelta(seconds=30)
#: The reason a stopping worker gives the store when it hands a run back.
RELEASE_REASON = "worker_shutdown"
#: A hand-back is retried this long while the store is unreachable (the stop has
#: a deadline; a run not handed back is re-sent by the sweeper once its heartbeat
#: lapses).
RELEASE_WITHIN = timedelta(seconds=0.5)

#: A run claimed at least this long before its fire time waits among the held runs,
#: not in the consumer's thread (which goes back to the broker meanwhile).
HOLD_AT_LEAST = timedelta(milliseconds=50)


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
    within: timedelta = timedelta(seconds=3),
    first_delay: float = 0.1,
    max_delay: float = 2.0,
) -> T:
    """``call()``, retried with backoff while the store is unreachable, for at most
    ``within``; any other error, or an unreachable one past ``within``, propagates."""
    delay = first_delay
    deadline = time.monotonic() + within.total_seconds()
    for attempt in itertools.count(1):
        try:
            return call()
        except grpc.RpcError as exc:
            left = deadline - time.monotonic()
            if exc.code() not in _TRANSIENT or left <= 0:
                raise
            log.warning(
                "%s: %s (%s); retry %d, %.1fs left", what, exc.code().name, exc.details(),
                attempt, left,
            )  # fmt: skip
            time.sleep(min(delay, left))
            delay = min(delay * 2, max_delay)
    raise AssertionError("unreachable")  # the loop returns or raises


@dataclass(frozen=True)
class Isolation:
    """Where job bodies run: in job processes from ``pool`` (killable, the default),
    or in threads of the worker when ``pool`` is None."""

    pool: JobProcessPool | None
    kill_grace: timedelta = timedelta(seconds=2)


class RunProcessor:
    """Turns one run message into at most one completed attempt."""

    def __init__(
        self,
        store: Any,  # WorkflowStoreServiceStub
        registry: Registry,
        worker_id: str,
        stats: WorkerStats,
        broker: RedisBroker | None = None,
        isolation: Isolation | None = None,
        run_status: RunStatusCache | None = None,
        faults: FaultHooks = NO_FAULTS,
        held: HeldRuns | None = None,
        drills: DrillHooks = NO_DRILLS,
        draining: Draining | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self.worker_id = worker_id
        self.stats = stats
        self.broker = broker
        self.isolation = isolation or Isolation(pool=None)
        self.run_status = run_status  # terminal runs, for readers of run status
        self.faults = faults  # no-op hooks unless the process was started for tests
        self.held = held  # runs claimed ahead of their fire time wait there
        self.drills = drills  # no-op hooks unless the process was started for drills
        self.draining = draining or Draining()  # the runs handled now, and the stop
        # Claims and completions of the runs this worker handles at once go to the
        # store together (group commit; see cronwave_core.batching).
        self.claims: Coalescer[store_pb.ClaimRunRequest, store_pb.ClaimRunResponse] = Coalescer(
            "claim",
            lambda requests: results_of(
                store.ClaimRuns(store_pb.ClaimRunsRequest(claims=requests)).results, "claim"
            ),
            _with_traceparent,
            hop=Hop.PICKUP,
        )
        self.completions: Coalescer[store_pb.CompleteRunRequest, store_pb.CompleteRunResponse] = (
            Coalescer("complete", self._complete_many, _with_traceparent, hop=Hop.COMPLETE)
        )

        self.runs: Coalescer[store_pb.GetRunRequest, common_pb2.Run] = Coalescer(
            "get", lambda requests: _runs_by_id(store, requests), _with_traceparent, hop=Hop.PICKUP
        )

    def _complete_many(
        self, requests: list[store_pb.CompleteRunRequest]
    ) -> list[store_pb.CompleteRunResponse | BaseException]:
        """A batch of completions in one store call; the runs it ended go to the
        run-status cache together, once they are durable."""
        answers: list[store_pb.CompleteRunResponse | BaseException] = results_of(
            self.store.CompleteRuns(store_pb.CompleteRunsRequest(completions=requests)).results,
            "completion",
        )
        if self.run_status is not None:
            self.run_status.put_many([a.run for a in answers if not isinstance(a, BaseException)])
        return answers

    def close(self) -> None:
        """Send the claims and completions still queued; refuse new ones."""
        self.claims.close()
        self.completions.close()
        self.runs.close()

    def process(self, kwargs: Mapping[str, Any], args: Sequence[Any] = (), queue: str = "") -> None:
        """Handle the message's arguments. A poison message is dead-lettered; a run
        that is not ours to run is skipped."""
        try:
            if args:
                raise UndecodableRunMessage("args", "a run message carries keyword arguments only")
            message = RunMessage.from_kwargs(kwargs)
        except UndecodableRunMessage as exc:
            run_id = kwargs.get("run_id") if isinstance(kwargs, Mapping) else None
            self.dead_letter(
                run_id if isinstance(run_id, str) else "",
                "",
                "undecodable",
                exc.message,
                queue=queue,
                message_json=_message_json(args, kwargs),
            )
            return
        if self._put_back_if_early(message):
            return
        stop = self.draining.enter(message.run_id)
        try:
            self._handle(message, stop)
        finally:
            self.draining.leave(stop)

    def _handle(self, message: RunMessage, stop: AttemptStop) -> None:
        if stop.requested:  # the worker is stopping: the run is another worker's to take
            self._put_back(message)
            return
        with extracted_context(message.trace):
            attrs = {
                **run_attributes(
                    message.run_id, message.schedule_id, message.fire_time.isoformat()
                ),
                ATTR_JOB_TYPE: message.job_type,
                ATTR_QUEUE: message.queue,
                ATTR_WORKER_ID: self.worker_id,
            }
            if message.trigger:
                attrs[ATTR_TRIGGER] = message.trigger
            # A latency fault of the queue: the message is taken this much later.
            key = run_key(message.schedule_id, message.fire_time)
            held = self.faults.inject("pickup", "queue", key)
            self._record_pickup(message, attrs, fault=bool(held))
            claim = self._claim(message, attrs)
            if claim is None:
                return
            if not claim.claimed:
                log.info(
                    "run %s not claimed (state %s): done, held by a live attempt, or not due",
                    message.run_id,
                    common_pb2.RunState.Name(claim.run.state),
                )
                return
            if claim.run.job_type not in self.registry:
                known = ", ".join(self.registry.names()) or "none"
                self.dead_letter(
                    claim.run.run_id,
                    claim.attempt_token,
                    "unknown_job_type",
                    f"this worker (queues {message.queue}) has no job type "
                    f"'{claim.run.job_type}'; it runs: {known}",
                    queue=message.queue,
                )
                return
            if self._hold_if_early(claim.run, claim.attempt_token, attrs):
                return
            self.stats.started()
            try:
                self._execute(claim.run, claim.attempt_token, attrs, stop)
            finally:
                self.stats.finished()

    def _hold_if_early(
        self, run: common_pb2.Run, attempt_token: str, attrs: Mapping[str, str]
    ) -> bool:
        """Hand a run claimed well ahead of its fire time to the held runs (see
        ``worker.held_runs``), released by a heartbeat interval at the latest; False
        when it is due too soon for that to pay (``HOLD_AT_LEAST``): it runs in this
        thread."""
        if self.held is None:
            return False
        now = datetime.now(UTC)
        fire_time = ts_to_dt(run.fire_time)
        if fire_time - now <= HOLD_AT_LEAST:
            return False
        beat_by = now + self.registry.get(run.job_type).heartbeat_interval
        context = contextvars.copy_context()  # the message's trace context
        stop = self.draining.enter(run.run_id)  # handled until run or handed back

        def attempt() -> None:
            try:
                if self._ended_while_held(run.run_id, attrs):
                    return
                self.stats.started()
                try:
                    self._execute(run, attempt_token, attrs, stop)
                finally:
                    self.stats.finished()
            finally:
                self.draining.leave(stop)

        def hand_back() -> None:  # the worker stopped while the run was held
            try:
                self._hand_back(run, attempt_token, "", attrs)
            finally:
                self.draining.leave(stop)

        self.held.hold(
            min(fire_time, beat_by + self.held.release_ahead),
            lambda: context.run(attempt),
            on_stop=lambda: context.run(hand_back),
        )
        return True

    def _ended_while_held(self, run_id: str, attrs: Mapping[str, str]) -> bool:
        """True when a held run ended before its release (a pause cancels the runs
        dispatched ahead of their fire time): its body must not start. Looked up off
        the critical path, before the instant; a store that does not answer counts as
        not ended (a cancellation is then seen at the attempt's first heartbeat)."""
        try:
            current = self.runs.call(store_pb.GetRunRequest(run_id=run_id), attributes=attrs)
        except grpc.RpcError:
            return False
        if current.state not in TERMINAL_STATES:
            return False
        log.info(
            "run %s ended while held (%s): not started",
            run_id,
            common_pb2.RunState.Name(current.state),
        )
        return True

    def _claim(
        self, message: RunMessage, attrs: Mapping[str, str]
    ) -> store_pb.ClaimRunResponse | None:
        with hop_span("worker.claim", Hop.PICKUP, Kind.APP, attrs) as span:
            try:
                claim: store_pb.ClaimRunResponse = with_retries(
                    lambda: self.claims.call(
                        store_pb.ClaimRunRequest(run_id=message.run_id, worker_id=self.worker_id)
                    ),
                    f"claim run {message.run_id}",
                )
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                span.set_attribute("cronwave.claimed", False)
                self.dead_letter(
                    message.run_id,
                    "",
                    "unknown_run",
                    exc.details() or "the store has no such run",
                    queue=message.queue,
                    message_json=_message_json((), message.to_kwargs()),
                )
                return None
            span.set_attribute("cronwave.claimed", claim.claimed)
            return claim

    def _put_back(self, message: RunMessage) -> None:
        """The message again on its queue, unclaimed, for another worker (if it is
        lost, the sweeper sends another once the run is overdue)."""
        if self.broker is None:
            return
        try:
            self.broker.enqueue(message.to_message())
        except Exception as exc:
            log.error("run %s: message not put back: %s", message.run_id, exc)

    def _hand_back(
        self,
        run: common_pb2.Run,
        attempt_token: str,
        checkpoint_json: str,
        attrs: Mapping[str, str],
    ) -> None:
        """Give a run this worker holds back to the store (``ReleaseRun``: PENDING, due
        now, ``checkpoint_json`` kept when given), then put a message for it on its
        queue, so another worker resumes it at once. A run that ended meanwhile, or
        that a newer attempt took, is left as it is; one the store cannot be told about
        is re-sent by the sweeper once its heartbeat lapses."""
        request = store_pb.ReleaseRunRequest(
            run_id=run.run_id,
            attempt_token=attempt_token,
            checkpoint_json=checkpoint_json,
            reason=RELEASE_REASON,
        )
        with tracer("cronwave").start_as_current_span("worker.release", attributes=attrs) as span:
            try:
                response = with_retries(
                    lambda: self.store.ReleaseRun(request),
                    f"release run {run.run_id}",
                    within=RELEASE_WITHIN,
                )
            except grpc.RpcError as exc:
                span.set_status(Status(StatusCode.ERROR, exc.details() or exc.code().name))
                log.warning("run %s: not handed back: %s", run.run_id, exc.details())
                return
            span.set_attribute("cronwave.released", response.released)
            if not response.released:
                return  # it ended meanwhile
            log.info("run %s attempt %d: handed back (worker stopping)", run.run_id, run.attempt)
            if self.broker is None:
                return
            message = RunMessage.for_run(response.run)
            try:
                self.broker.enqueue(message.to_message())
            except Exception as exc:  # the sweeper re-sends it once overdue
                log.error("run %s: message not enqueued after its release: %s", run.run_id, exc)

    def _put_back_if_early(self, message: RunMessage) -> bool:
        early = message.fire_time - datetime.now(UTC)
        if early <= EARLY_LIMIT or self.broker is None:
            return False
        delay = early - EARLY_LIMIT / 2
        log.info("run %s: message %.1fs early; put back", message.run_id, early.total_seconds())
        self.broker.enqueue(message.to_message(), delay=int(delay.total_seconds() * 1000))
        return True

    def dead_letter(
        self,
        run_id: str,
        attempt_token: str,
        reason: str,
        error: str,
        *,
        queue: str = "",
        message_json: str = "",
    ) -> None:
        """Put the run (or the message) on the store's dead-letter list; a store that
        cannot be reached is logged, the message is dropped either way."""
        log.warning("dead-lettering run %r: %s: %s", run_id, reason, error)
        request = store_pb.DeadLetterRunRequest(
            run_id=run_id,
            attempt_token=attempt_token,
            reason=reason,
            error=error,
            queue=queue,
            message_json=message_json,
        )
        try:
            with_retries(lambda: self.store.DeadLetterRun(request), f"dead-letter {run_id!r}")
        except grpc.RpcError as exc:
            log.error("run %r: dead letter not recorded: %s", run_id, exc.details())

    def _record_pickup(
        self, message: RunMessage, attrs: Mapping[str, str], fault: bool = False
    ) -> None:
        """The time the message waited in the broker, as a span from the enqueue to
        now (a span cannot be open across processes, so it is drawn afterwards)."""
        now_ns = time.time_ns()
        start = message.enqueued_at_ns if 0 < message.enqueued_at_ns <= now_ns else now_ns
        span = tracer("cronwave").start_span(
            "worker.pickup",
            start_time=start,
            attributes={ATTR_HOP: Hop.PICKUP, ATTR_KIND: Kind.QUEUE, **attrs},
        )
        if fault:
            latency = self.faults.get("pickup", "queue")
            span.set_attribute(ATTR_FAULT, latency.label if latency else "pickup:queue")
        span.end(end_time=now_ns)

    def _execute(
        self,
        run: common_pb2.Run,
        attempt_token: str,
        attrs: Mapping[str, str],
        stop: AttemptStop | None = None,
    ) -> None:
        fire_time = ts_to_dt(run.fire_time)
        job_type = self.registry.get(run.job_type)
        execute_attrs: dict[str, Any] = {
            **attrs,
            ATTR_HOP: Hop.EXECUTE,
            ATTR_KIND: Kind.APP,
            ATTR_JOB_TYPE: run.job_type,
            ATTR_ATTEMPT: run.attempt,
        }
        with tracer("cronwave").start_as_current_span(
            "worker.execute", attributes=execute_attrs, start_time=_held_until(fire_time, attrs)
        ) as span:
            self.faults.inject("execute", "app", run_key(run.schedule_id, fire_time), span)
            result = self._attempt(run, attempt_token, fire_time, job_type, stop)
            if result.body_started_ns:
                lateness_ms = (result.body_started_ns - epoch_ns(fire_time)) / 1e6
                span.set_attribute(ATTR_LATENESS_MS, lateness_ms)
            if result.overhead_ns:
                span.set_attribute(ATTR_OVERHEAD_MS, result.overhead_ns / 1e6)
            span.set_attribute(ATTR_OUTCOME, result.outcome.value)
            if result.error:
                span.set_status(Status(StatusCode.ERROR, result.error))
        if result.outcome is Outcome.SUPERSEDED:
            if result.body_started_ns:
                self._record_body_start(run, result.body_started_ns, fire_time)
            log.warning(
                "run %s attempt %d: superseded by a newer attempt; not completing",
                run.run_id,
                run.attempt,
            )
            return
        if result.outcome is Outcome.RELEASED:
            self._hand_back(run, attempt_token, result.checkpoint_json, attrs)
            return
        policy = job_type.retry_policy
        failed_attempt = 1
        if result.outcome is Outcome.FAILED and policy.retryable(result.error_types):
            failed_attempt += self._failed_attempts(run.run_id)
        decision = decide(result, policy, failed_attempt)
        with hop_span(
            "worker.complete", Hop.COMPLETE, Kind.APP, {**attrs, ATTR_ATTEMPT: run.attempt}
        ) as span:
            self._finish(run, attempt_token, result, decision, span)
        # A success is the common case, and its record is the run itself: logged at
        # debug level, so the log keeps what needs a look.
        log.log(
            logging.DEBUG if result.outcome is Outcome.SUCCEEDED else logging.INFO,
            "run %s (%s) attempt %d: %s -> %s%s",
            run.run_id,
            run.job_type,
            run.attempt,
            result.outcome.value,
            decision.action.value,
            f" ({result.error})" if result.error else "",
        )

    def _record_body_start(self, run: common_pb2.Run, started_ns: int, fire_time: datetime) -> None:
        """Append the run event ``started``, detail ``body_started_at=<ISO, µs>
        lateness_ms=<ms>``: when the job body began, readable without tracing (the
        run's ``started_at`` is its claim, which the dispatch lead puts before the fire
        time). A completion records it in its own transaction (``body_started_at``);
        this is for an attempt that is not completed (superseded, dead-lettered).
        Best effort: a history the store cannot take is logged, not fatal."""
        started = _EPOCH + timedelta(microseconds=started_ns // 1000)
        lateness_ms = (started_ns - epoch_ns(fire_time)) / 1e6
        detail = (
            f"body_started_at={started.isoformat(timespec='microseconds')} "
            f"lateness_ms={lateness_ms:.3f}"
        )
        request = store_pb.AppendRunEventRequest(run_id=run.run_id, kind="started", detail=detail)
        try:
            self.store.AppendRunEvent(request)
        except grpc.RpcError as exc:
            log.warning("run %s: event started not recorded: %s", run.run_id, exc.details())

    def _finish(
        self,
        run: common_pb2.Run,
        attempt_token: str,
        result: AttemptResult,
        decision: Decision,
        span: trace.Span,
    ) -> None:
        if decision.action is Action.DEAD_LETTER:
            if result.body_started_ns:
                self._record_body_start(run, result.body_started_ns, ts_to_dt(run.fire_time))
            self.dead_letter(
                run.run_id,
                attempt_token,
                "retries_exhausted",
                f"{result.error} ({decision.detail})",
                queue=run.queue,
            )
            return
        self.drills.before_complete(run.run_id, run.attempt)
        request = store_pb.CompleteRunRequest(
            run_id=run.run_id,
            attempt_token=attempt_token,
            state=_STATE[result.outcome],
            error=result.error,
            result_json=json.dumps(result.result) if result.outcome is Outcome.SUCCEEDED else "",
        )
        if decision.action is Action.RETRY:
            request.retry_after.CopyFrom(td_to_duration(decision.retry_after))
        if result.body_started_ns:
            request.body_started_at.FromNanoseconds(result.body_started_ns)
        try:
            # The attempt holds the run until its heartbeat lapses: a store restart
            # shorter than that must not lose the completion (the body would run again).
            response = with_retries(
                lambda: self.completions.call(request),
                f"complete run {run.run_id}",
                within=self.registry.get(run.job_type).heartbeat_timeout,
            )
        except grpc.RpcError as exc:
            if exc.code() not in _NOT_OURS:
                raise
            log.warning("run %s: completion refused: %s", run.run_id, exc.details())
            span.set_attribute("cronwave.completed", False)
            return
        span.set_attribute("cronwave.completed", response.changed)
        if decision.action is Action.RETRY and response.changed:
            self._enqueue_retry(response.run, decision.retry_after)

    def _enqueue_retry(self, run: common_pb2.Run, delay: timedelta) -> None:
        """The retry's message, held by the broker until the delay has passed. If it is
        lost, the dispatcher's sweeper sends another once the run is overdue."""
        if self.broker is None:
            return
        message = RunMessage.for_run(run, delay=delay)
        try:
            self.broker.enqueue(message.to_message(), delay=int(delay.total_seconds() * 1000))
        except Exception as exc:  # the sweeper re-sends it once overdue
            log.error("run %s: retry message not enqueued: %s", run.run_id, exc)

    def _failed_attempts(self, run_id: str) -> int:
        """Attempts of the run that raised before this one, since its last replay (a
        replay starts a fresh retry budget). Resumptions after a crash do not count."""
        try:
            events = with_retries(
                lambda: self.store.ListRunEvents(store_pb.ListRunEventsRequest(run_id=run_id)),
                f"history of run {run_id}",
            ).events
        except grpc.RpcError as exc:
            log.warning("run %s: history unavailable (%s); counting 0", run_id, exc.details())
            return 0
        count = 0
        for event in events:
            if event.kind == "replayed":
                count = 0
            elif event.kind == "retry_scheduled":
                count += 1
        return count

    def _attempt(
        self,
        run: common_pb2.Run,
        attempt_token: str,
        fire_time: datetime,
        job_type: JobType,
        stop: AttemptStop | None = None,
    ) -> AttemptResult:
        try:
            payload = _json_object(run.payload_json, "payload_json")
            checkpoint = _json_object(run.checkpoint_json, "checkpoint_json")
        except Exception as exc:  # the run cannot start here; record why
            return AttemptResult(Outcome.FAILED, error=describe(exc), error_types=("ValueError",))

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

        pool = self.isolation.pool
        if pool is not None:
            spec = {
                "run_id": run.run_id,
                "schedule_id": run.schedule_id,
                "fire_time": fire_time.isoformat(),
                "attempt": run.attempt,
                "job_type": run.job_type,
                "payload": payload,
                "checkpoint": checkpoint,
                "trace": inject_context(),
            }
            in_process = ProcessSupervisor(
                pool,
                beat,
                heartbeat_interval=job_type.heartbeat_interval,
                duration_limit=job_type.duration_limit,
                kill_grace=self.isolation.kill_grace,
                run_id=run.run_id,
            )
            if stop is not None:
                stop.attach(in_process)
            return in_process.run(spec, fire_time)
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
        if stop is not None:
            stop.attach(supervisor)
        return supervisor.run(job_type.fn, ctx, fire_time)


def _runs_by_id(
    store: Any, requests: list[store_pb.GetRunRequest]
) -> list[common_pb2.Run | BaseException]:
    """``GetRuns`` answered per run; a run the store does not have is NOT_FOUND."""
    found = {run.run_id: run for run in store.GetRuns(store_pb.GetRunsRequest(runs=requests)).runs}
    return [
        found.get(r.run_id) or ItemRefused(grpc.StatusCode.NOT_FOUND, f"run '{r.run_id}' not found")
        for r in requests
    ]


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


def _with_traceparent(request: Any, traceparent: str) -> Any:
    request.traceparent = traceparent
    return request


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


def _message_json(args: Sequence[Any], kwargs: Any) -> str:
    """A poison message as it arrived, for the dead-letter list (never executed)."""
    return json.dumps({"args": list(args), "kwargs": kwargs}, default=repr)[:10_000]
