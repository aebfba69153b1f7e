"""Completion: the attempt's outcome goes to the store, once.

A superseded attempt (a newer one owns the run) is not completed; a released one (the
worker is stopping) is handed back. Otherwise the job type's retry policy decides
(``worker.outcome``): complete, retry later (the retry's message is held by the
broker until then), or dead-letter a run out of retries. The attempt holds the run
until its heartbeat lapses, so a completion waits out a store restart shorter than
that; a completion the store refuses (the attempt is no longer this worker's) is
logged and dropped. Completions of the runs this worker handles at once go to the
store together (group commit), and the runs they end go to the run-status cache.

A result over ``result_bytes`` of JSON (``CRONWAVE_MAX_RESULT_BYTES``) ends the run
FAILED, not retried (error type ``ResultTooLarge``): the store would refuse it, and the
same body returns the same result again. The store answers a completion with the run's
state and no blobs (no payload, result or checkpoint), so the cache holds the run's
status; a batch also ends before the completion that would take it past
``BATCH_BYTES``, so a batch of results at their limit stays one request.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from dramatiq.brokers.redis import RedisBroker

from cronwave_core.batching import Coalescer, results_of
from cronwave_core.caching import RunStatusCache
from cronwave_core.convert import td_to_duration
from cronwave_core.domain.instants import epoch_ns
from cronwave_core.limits import DEFAULT_LIMITS, MIB
from cronwave_core.queueing import RunMessage
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import Hop, Kind
from worker.chain import Delivery, Poison, RunMiddleware, Skip
from worker.handback import hand_back
from worker.jobs import Registry
from worker.middleware.claim import with_traceparent
from worker.middleware.tracing import ATTR_ATTEMPT
from worker.outcome import Action, decide
from worker.store_port import NOT_OURS, RunStore, with_retries
from worker.supervisor import AttemptResult, Outcome

log = logging.getLogger("cronwave.worker")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_STATE = {
    Outcome.SUCCEEDED: common_pb2.RUN_STATE_SUCCEEDED,
    Outcome.FAILED: common_pb2.RUN_STATE_FAILED,
    Outcome.TIMED_OUT: common_pb2.RUN_STATE_TIMED_OUT,
    Outcome.CANCELLED: common_pb2.RUN_STATE_CANCELLED,
}
#: The states a run ends in.
ENDED = frozenset(
    {
        common_pb2.RUN_STATE_SUCCEEDED,
        common_pb2.RUN_STATE_FAILED,
        common_pb2.RUN_STATE_TIMED_OUT,
        common_pb2.RUN_STATE_CANCELLED,
        common_pb2.RUN_STATE_DEAD_LETTERED,
    }
)
#: A batch of completions ends before the one that would take its encoding past this:
#: well under the store's receive cap (16 MiB by default), whatever the results hold.
BATCH_BYTES = 4 * MIB
#: The error types of a result over the limit: never retried.
RESULT_TOO_LARGE = ("ResultTooLarge", "NonRetryable")


def bounded(result: AttemptResult, limit: int) -> AttemptResult:
    """``result``, or a FAILED one when it is a success whose result is more than
    ``limit`` bytes of the JSON the store would be sent."""
    if result.outcome is not Outcome.SUCCEEDED:
        return result
    size = len(json.dumps(result.result))  # ASCII: one byte a character
    if size <= limit:
        return result
    return replace(
        result,
        outcome=Outcome.FAILED,
        result={},
        error=(
            f"ResultTooLarge: result: at most {limit} bytes of JSON "
            f"(CRONWAVE_MAX_RESULT_BYTES), got {size}; return a summary and keep the "
            "data elsewhere"
        ),
        error_types=RESULT_TOO_LARGE,
    )


class Completion(RunMiddleware):
    def __init__(
        self,
        store: RunStore,
        registry: Registry,
        broker: RedisBroker | None = None,
        run_status: RunStatusCache | None = None,
        result_bytes: int = DEFAULT_LIMITS.result_bytes,
    ) -> None:
        self.store = store
        self.registry = registry
        self.broker = broker
        self.run_status = run_status  # terminal runs, for readers of run status
        self.result_bytes = result_bytes
        self.completions: Coalescer[store_pb.CompleteRunRequest, store_pb.CompleteRunResponse] = (
            Coalescer(
                "complete",
                self._complete_many,
                with_traceparent,
                hop=Hop.COMPLETE,
                max_bytes=BATCH_BYTES,
                size=lambda request: request.ByteSize(),
            )
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

    def before_complete(self, delivery: Delivery) -> None:
        """Settle what is not completed (superseded, released, out of retries) and
        decide; the completion itself is sent in ``after_complete``, so the hooks
        after this one run just before it."""
        run, result = delivery.run, delivery.result
        if result is None or delivery.job_type is None:
            raise Skip
        result = delivery.result = bounded(result, self.result_bytes)
        # The attempt's end, whatever it is, is the complete hop's time.
        delivery.span = delivery.phase.enter_context(
            hop_span(
                "worker.complete",
                Hop.COMPLETE,
                Kind.APP,
                {**delivery.attrs, ATTR_ATTEMPT: run.attempt},
            )
        )
        if result.outcome is Outcome.SUPERSEDED:
            if result.body_started_ns and not delivery.start_recorded():
                self._record_body_start(delivery, result.body_started_ns)
            log.warning(
                "run %s attempt %d: superseded by a newer attempt; not completing",
                run.run_id,
                run.attempt,
            )
            raise Skip
        if result.outcome is Outcome.RELEASED:
            hand_back(
                self.store,
                self.broker,
                run,
                delivery.attempt_token,
                result.checkpoint_json,
                delivery.attrs,
            )
            raise Skip
        policy = delivery.job_type.retry_policy
        failed_attempt = 1
        if result.outcome is Outcome.FAILED and policy.retryable(result.error_types):
            failed_attempt += self._failed_attempts(run.run_id)
        decision = delivery.decision = decide(result, policy, failed_attempt)
        if decision.action is Action.DEAD_LETTER:
            if result.body_started_ns and not delivery.start_recorded():
                self._record_body_start(delivery, result.body_started_ns)
            self._log(delivery)
            raise Poison(
                "retries_exhausted",
                f"{result.error} ({decision.detail})",
                run_id=run.run_id,
                attempt_token=delivery.attempt_token,
                queue=run.queue,
            )

    def after_complete(self, delivery: Delivery) -> None:
        run, result, decision = delivery.run, delivery.result, delivery.decision
        assert result is not None and decision is not None  # before_complete settled them
        request = store_pb.CompleteRunRequest(
            run_id=run.run_id,
            attempt_token=delivery.attempt_token,
            state=_STATE[result.outcome],
            error=result.error,
            result_json=json.dumps(result.result) if result.outcome is Outcome.SUCCEEDED else "",
        )
        if decision.action is Action.RETRY:
            request.retry_after.CopyFrom(td_to_duration(decision.retry_after))
        if result.body_started_ns and not delivery.start_recorded():
            request.body_started_at.FromNanoseconds(result.body_started_ns)
        span = delivery.span
        try:
            # The attempt holds the run until its heartbeat lapses: a store restart
            # shorter than that must not lose the completion (the body would run again).
            response = with_retries(
                lambda: self.completions.call(request),
                f"complete run {run.run_id}",
                within=self.registry.get(run.job_type).heartbeat_timeout,
            )
        except grpc.RpcError as exc:
            if exc.code() not in NOT_OURS:
                raise
            log.warning("run %s: completion refused: %s", run.run_id, exc.details())
            span.set_attribute("cronwave.completed", False)
        else:
            span.set_attribute("cronwave.completed", response.changed)
            if response.changed and response.run.state in ENDED:
                delivery.ended_run = response.run  # the run span is recorded (tracing)
            retrying = response.run.state == common_pb2.RUN_STATE_PENDING  # not cancelled
            if decision.action is Action.RETRY and response.changed and retrying:
                self._enqueue_retry(response.run, decision.retry_after)
        self._log(delivery)

    def close(self) -> None:
        self.completions.close()

    def _log(self, delivery: Delivery) -> None:
        # A success is the common case, and its record is the run itself: logged at
        # debug level, so the log keeps what needs a look.
        run, result, decision = delivery.run, delivery.result, delivery.decision
        assert result is not None and decision is not None
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

    def _record_body_start(self, delivery: Delivery, started_ns: int) -> None:
        """Append the run event ``started``, detail ``body_started_at=<ISO, µs>
        lateness_ms=<ms>``: when the job body began, readable without tracing (the
        run's ``started_at`` is the first attempt's). A heartbeat records it while a
        long body runs, and a completion in its own transaction (``body_started_at``)
        when the body ended first; this is for an attempt that is not completed
        (superseded, dead-lettered).
        Best effort: a history the store cannot take is logged, not fatal."""
        run_id = delivery.run.run_id
        started = _EPOCH + timedelta(microseconds=started_ns // 1000)
        lateness_ms = (started_ns - epoch_ns(delivery.fire_time)) / 1e6
        detail = (
            f"body_started_at={started.isoformat(timespec='microseconds')} "
            f"lateness_ms={lateness_ms:.3f}"
        )
        event = store_pb.AppendRunEventRequest(run_id=run_id, kind="started", detail=detail)
        try:
            (result,) = self.store.AppendRunEvents(
                store_pb.AppendRunEventsRequest(events=[event])
            ).results
        except grpc.RpcError as exc:
            log.warning("run %s: event started not recorded: %s", run_id, exc.details())
            return
        if result.HasField("error"):
            log.warning("run %s: event started not recorded: %s", run_id, result.error.message)

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
