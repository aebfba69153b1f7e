"""``cronwave.v1.DispatcherService``: record the run in the store, enqueue new runs.

The store decides whether a start is new (one run per schedule and fire time, only
from the newest fencing token). A store error reaches the caller with its code and
message unchanged, so a stale planner sees FAILED_PRECONDITION and an unknown schedule
NOT_FOUND, exactly as the store said it; a failed call keeps its status details too
(the error's kind), a refused item has none to keep (``cronwave_core.status``).

Every start takes one path (``DispatcherServicer._start``), as a batch: a planner's
fires arrive many at a time (``StartRuns``), a trigger is a batch of one
(``TriggerRun``). Two look-ups come first (``caches``): a scheduled start found in the
de-duplication cache is a start the store already recorded, and is answered without
recording anything; every start is routed to its job type's queue by a cached route
(the store routes what the cache does not know). Then one ``RecordRuns`` call records
the rest, and one round trip to Redis queues the new runs.

A batch's spans are its runs' (``fanout``): each item carries its run's trace context,
the batch's spans are copied into every item's trace, and each queued message carries
its run's copy of the enqueue span.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as pb_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from dramatiq.brokers.redis import RedisBroker
from opentelemetry import context as otel_context
from opentelemetry import trace

from cronwave_core.caching import CacheControl, RunStatusCache
from cronwave_core.convert import dt_to_ts, ts_to_dt
from cronwave_core.errors import InvalidArgument, Unavailable
from cronwave_core.faults import run_key
from cronwave_core.limits import DEFAULT_LIMITS, RequestLimits
from cronwave_core.queueing import DEFAULT_QUEUE, RunMessage, enqueue_many, trigger_name
from cronwave_core.rpc import error_from_item, item_error, relayed_status
from cronwave_core.telemetry import fanout
from cronwave_core.telemetry.fanout import ATTR_BATCH_SIZE
from cronwave_core.telemetry.run_span import new_run_context
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import (
    ATTR_FIRE_TIME,
    ATTR_HOP,
    ATTR_JOB_TYPE,
    ATTR_KIND,
    ATTR_QUEUE,
    ATTR_RUN_ID,
    ATTR_SCHEDULE_ID,
    ATTR_TRIGGER,
    Hop,
    Kind,
    run_attributes,
)
from dispatcher.caches import DedupCache, RouteCache
from dispatcher.requests import StartRequest, check_planned, manual_fire_time

log = logging.getLogger("cronwave.dispatcher")


def _now() -> datetime:
    return datetime.now(UTC)


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return f"{ctx.trace_id:032x}" if ctx.is_valid else ""


@contextmanager
def _attached(ctx: otel_context.Context) -> Iterator[None]:
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


class DispatcherServicer(pb_grpc.DispatcherServiceServicer):
    """Thin adapter: proto in, store and broker out."""

    def __init__(
        self,
        store: Any,  # WorkflowStoreServiceStub
        broker: RedisBroker,
        now: Callable[[], datetime] = _now,
        *,
        routes: RouteCache | None = None,
        dedup: DedupCache | None = None,
        run_status: RunStatusCache | None = None,
        limits: RequestLimits = DEFAULT_LIMITS,
        queues: set[str] | None = None,
    ) -> None:
        self.store = store
        #: The queues this dispatcher has sent to (the sweeper reads their backlog).
        self.queues = queues if queues is not None else set()
        self.limits = limits
        self.broker = broker
        self.now = now
        self.routes = routes
        self.dedup = dedup
        self.run_status = run_status

    def TriggerRun(
        self, request: pb.TriggerRunRequest, context: grpc.ServicerContext
    ) -> pb.TriggerRunResponse:
        """A start of the schedule now, as a batch of one: its own span stands for
        the run as a planner's fire span does, and the batch's spans are copied under
        it (``fanout``). A manual fire time is new by construction, so nothing is
        de-duplicated; a refusal ends the call with the store's code and message.

        The trigger's arrival begins the run's trace (``run_span``): the call's own
        server span stays in its caller's trace, linked from the trigger's span."""
        call = trace.get_current_span()
        arrived = getattr(call, "start_time", None) or time.time_ns()
        with (
            _attached(new_run_context(arrived)),
            hop_span("dispatch.trigger_run", Hop.DISPATCH, Kind.APP) as span,
        ):
            if call.get_span_context().is_valid:
                span.add_link(call.get_span_context())
            start = StartRequest(
                schedule_id=request.schedule_id,
                fire_time=manual_fire_time(self.now()),
                trigger=common_pb2.TRIGGER_KIND_MANUAL,
                idempotency_key=request.idempotency_key,
                payload_json=request.payload_json,
                limits=self.limits,
            )
            known = {
                ATTR_SCHEDULE_ID: start.schedule_id,
                ATTR_FIRE_TIME: start.fire_time.isoformat(),
                ATTR_TRIGGER: trigger_name(start.trigger),
            }
            span.set_attributes(known)
            item = fanout.item_for_current(known)
            if item is None:  # outside a trace: nothing to copy
                [result] = self._start([(start, item)], context, dedupe=False, payloads=True)
            else:
                batch = {ATTR_HOP: Hop.DISPATCH, ATTR_KIND: Kind.APP}
                with fanout.batch_span("dispatch.start_runs", [item], batch):
                    [result] = self._start([(start, item)], context, dedupe=False, payloads=True)
            if result.HasField("error"):
                raise error_from_item(result.error)
            run = result.started.run
            if result.started.created:
                span.set_attributes(
                    {
                        **run_attributes(run.run_id, run.schedule_id, known[ATTR_FIRE_TIME]),
                        ATTR_JOB_TYPE: run.job_type,
                        ATTR_QUEUE: run.queue or DEFAULT_QUEUE,
                        "cronwave.created": True,
                    }
                )
            else:
                # Not the run's own span: a repeated trigger is no part of its waterfall.
                span.set_attribute("cronwave.duplicate_of", run.run_id)
            return pb.TriggerRunResponse(run=run, created=result.started.created)

    def StartRuns(
        self, request: pb.StartRunsRequest, context: grpc.ServicerContext
    ) -> pb.StartRunsResponse:
        """Scheduled starts: looked up together (one round trip to Redis per cache),
        recorded in one store call, queued in one round trip. Each item gets its own
        answer or refusal."""
        with hop_span("dispatch.start_runs", Hop.DISPATCH, Kind.APP) as span:
            starts = _batch_starts(request, self.limits)
            span.set_attribute(ATTR_BATCH_SIZE, len(starts))
            return pb.StartRunsResponse(results=self._start(starts, context, dedupe=True))

    def _start(
        self,
        starts: list[tuple[StartRequest, fanout.Item | None]],
        context: grpc.ServicerContext,
        *,
        dedupe: bool,
        payloads: bool = False,
    ) -> list[pb.StartRunResult]:
        """The one start path. With ``dedupe``, a start the de-duplication cache knows
        is answered from it; every other start is routed (the store routes what the
        route cache does not know), recorded and queued. With ``payloads`` (a trigger:
        one start), the run comes back with its payload."""
        control = CacheControl.from_metadata(context.invocation_metadata())
        keys = [run_key(start.schedule_id, start.fire_time) for start, _ in starts]
        known = self._known_many(keys, control) if dedupe else [None] * len(keys)
        routes = self._routes_many([start.schedule_id for start, _ in starts], control)
        pending: list[_Pending] = []
        results = [pb.StartRunResult() for _ in starts]
        for index, (start, item) in enumerate(starts):
            run = known[index]
            # A start with an older token than the run's goes on to the store, which
            # refuses it: a deposed planner must learn that it is deposed.
            if run is not None and start.fencing_token >= run.fencing_token:
                results[index].started.CopyFrom(
                    pb.StartRunResponse(run=self._current(run), created=False)
                )
                continue
            pending.append(_Pending(index, start, item, routes[index]))
        if pending:
            self._record(pending, results, context, remember=dedupe, payloads=payloads)
        return results

    def _known_many(self, keys: list[str], control: CacheControl) -> list[common_pb2.Run | None]:
        if self.dedup is None:
            return [None] * len(keys)
        return self.dedup.lookup_many(keys, control)

    def _routes_many(self, schedule_ids: list[str], control: CacheControl) -> list[str]:
        """The queue of each start as the route cache knows it; "" lets the store
        choose (and ``learn_many`` the route from its answer)."""
        if self.routes is None:
            return [""] * len(schedule_ids)
        found = self.routes.cached_many(schedule_ids, control=control)
        return [route.queue if route is not None else "" for route in found]

    def _record(
        self,
        pending: list[_Pending],
        results: list[pb.StartRunResult],
        context: grpc.ServicerContext,
        *,
        remember: bool,
        payloads: bool,
    ) -> None:
        """Record the starts that go to the store, in one call (a new run's
        ``enqueued`` event is written with it), and queue the runs it created."""
        requests = [
            _record_request(
                p.start,
                p.queue,
                trace_id=f"{p.item.trace_id:032x}" if p.item else current_trace_id(),
                traceparent=p.item.under_current().traceparent() if p.item else "",
            )
            for p in pending
        ]
        try:
            recorded = self.store.RecordRuns(
                store_pb.RecordRunsRequest(runs=requests, with_payloads=payloads)
            )
        except grpc.RpcError as exc:
            _abort_like(context, exc)
        created: list[tuple[_Pending, common_pb2.Run]] = []
        recorded_runs: list[tuple[_Pending, common_pb2.Run]] = []
        for p, result in zip(pending, recorded.results, strict=True):
            if result.HasField("error"):
                results[p.index].error.CopyFrom(result.error)
                continue
            run = result.recorded.run
            if p.item is not None:  # the copies of this batch's spans name the run
                p.item.attributes.update(
                    {
                        ATTR_RUN_ID: run.run_id,
                        ATTR_JOB_TYPE: run.job_type,
                        ATTR_QUEUE: run.queue or DEFAULT_QUEUE,
                    }
                )
            recorded_runs.append((p, run))
            results[p.index].started.CopyFrom(
                pb.StartRunResponse(run=run, created=result.recorded.created)
            )
            if result.recorded.created or _maybe_unqueued(run):
                created.append((p, run))
        if created:
            self._enqueue(created, results)
        # Remembered only once queued: a start the cache answers has had its message
        # sent (a dispatcher that died between the two leaves the next one to send it).
        if remember and self.dedup is not None:
            self.dedup.remember_many(
                [
                    (run_key(p.start.schedule_id, p.start.fire_time), run)
                    for p, run in recorded_runs
                    if results[p.index].HasField("started")
                ]
            )
        if self.routes is not None:
            self.routes.learn_many([run for p, run in recorded_runs if not p.queue])

    def _enqueue(
        self, created: list[tuple[_Pending, common_pb2.Run]], results: list[pb.StartRunResult]
    ) -> None:
        """Queue the new runs, and the recorded ones that may never have been queued
        (``_maybe_unqueued``), in one round trip (a new run's ``enqueued`` event was
        written with its record, so a run's history never shows its claim before its
        enqueue)."""
        attrs = {ATTR_BATCH_SIZE: len(created)}
        with hop_span("dispatch.enqueue", Hop.DISPATCH, Kind.QUEUE, attrs):
            messages = []
            self.queues.update({run.queue or DEFAULT_QUEUE for _, run in created})
            for p, run in created:
                # Each message carries its run's copy of this span as its parent; the
                # worker names the run on its spans from the message itself.
                carrier = {"traceparent": p.item.under_current().traceparent()} if p.item else None
                messages.append(RunMessage.for_run(run, trace=carrier).to_message())
            try:
                enqueue_many(self.broker, messages)
            except Exception as exc:  # redis down, or refused the write
                queues = sorted({run.queue or DEFAULT_QUEUE for _, run in created})
                log.error("%d runs: enqueue on %s failed: %s", len(created), queues, exc)
                self._events([_enqueue_failed(run, exc) for _, run in created])
                for p, run in created:
                    results[p.index].ClearField("started")
                    results[p.index].error.CopyFrom(item_error(_unqueued(run, exc)))

    def _current(self, known: common_pb2.Run) -> common_pb2.Run:
        """The run a duplicate start stands for, as it is now: from the run-status
        cache when it has ended, else read from the store; as the cache knew it when
        the store cannot be read."""
        if self.run_status is not None:
            ended = self.run_status.lookup(known.run_id, Hop.DISPATCH)
            if ended is not None:
                return ended
        request = store_pb.GetRunsRequest(runs=[store_pb.GetRunRequest(run_id=known.run_id)])
        try:
            runs = self.store.GetRuns(request).runs
        except grpc.RpcError as exc:
            log.warning("run %s: duplicate answered as cached; store: %s", known.run_id, exc)
            return known
        return runs[0] if runs else known

    def _events(self, events: list[store_pb.AppendRunEventRequest]) -> None:
        """Append to the runs' histories in one store call. The runs are already
        recorded, so a history write that fails is logged, not turned into a failed
        start."""
        try:
            answer = self.store.AppendRunEvents(store_pb.AppendRunEventsRequest(events=events))
        except grpc.RpcError as exc:
            log.warning("%d events not recorded: %s", len(events), exc.details())
            return
        for event, result in zip(events, answer.results, strict=False):
            if result.HasField("error"):
                log.warning(
                    "run %s: event %s not recorded: %s",
                    event.run_id,
                    event.kind,
                    result.error.message,
                )


#: More starts than this in one StartRuns is refused as a whole.
MAX_BATCH = 1000


@dataclass
class _Pending:
    """A start of a batch that goes to the store."""

    index: int
    start: StartRequest
    item: fanout.Item | None
    queue: str


def _batch_starts(
    request: pb.StartRunsRequest, limits: RequestLimits
) -> list[tuple[StartRequest, fanout.Item | None]]:
    """The starts of a batch, validated as a whole (a malformed item refuses the
    batch, naming the item), with the batch items their spans are copied for."""
    if len(request.starts) > MAX_BATCH:
        raise InvalidArgument("starts", f"at most {MAX_BATCH} per call, got {len(request.starts)}")
    starts: list[tuple[StartRequest, fanout.Item | None]] = []
    for index, item in enumerate(request.starts):
        start = _start_request(item, limits, f"starts[{index}].")
        check_planned(start, f"starts[{index}].")
        starts.append((start, fanout.item_of(item)))
    # The batch's spans are copied into the trace of every start that has one.
    fanout.register([item for _, item in starts if item is not None])
    return starts


def _start_request(
    request: pb.StartRunRequest, limits: RequestLimits, where: str = ""
) -> StartRequest:
    """A start as a domain value; a missing or bad field is refused, named with
    ``where`` in front (``starts[3].`` in a batch)."""
    if not request.schedule_id.strip():
        raise InvalidArgument(f"{where}schedule_id", "required")
    if not request.HasField("fire_time"):
        raise InvalidArgument(f"{where}fire_time", "required")
    if request.fencing_token < 0:
        raise InvalidArgument(f"{where}fencing_token", "must not be negative")
    try:
        limits.identifier(request.traceparent, "traceparent")
        return StartRequest(
            schedule_id=request.schedule_id,
            fire_time=ts_to_dt(request.fire_time, "fire_time"),
            trigger=request.trigger or common_pb2.TRIGGER_KIND_SCHEDULED,
            fencing_token=request.fencing_token,
            fencing_scope=request.fencing_scope,
            idempotency_key=request.idempotency_key,
            limits=limits,
        )
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}{exc.field}", exc.rule) from None


def _maybe_unqueued(run: common_pb2.Run) -> bool:
    """Whether a start the store already had may have lost its message: the run is
    PENDING and no attempt ever claimed it. A start reaches the store again only when
    the caller did not get the first answer (the dispatcher or the store died, or the
    reply was lost), and that first start may have been recorded without its message
    being sent. A second message is harmless: a claim lets one attempt hold the run.
    Sending it now spares the run the sweeper's wait for an overdue run."""
    return run.state == common_pb2.RUN_STATE_PENDING and run.attempt == 0


def _record_request(
    start: StartRequest,
    queue: str,
    *,
    trace_id: str,
    traceparent: str,
) -> store_pb.RecordRunRequest:
    """What the store is asked to record for ``start``, routed to ``queue`` ("" lets
    the store route it). The run's ``enqueued`` event is written with it, so its
    history says "enqueued" before a worker can claim it."""
    return store_pb.RecordRunRequest(
        schedule_id=start.schedule_id,
        fire_time=dt_to_ts(start.fire_time),
        trigger=start.trigger,
        fencing_token=start.fencing_token,
        fencing_scope=start.fencing_scope,
        idempotency_key=start.idempotency_key,
        queue=queue,
        trace_id=trace_id,
        traceparent=traceparent,
        enqueue=True,
        payload_json=start.payload_json,
    )


def _enqueue_failed(run: common_pb2.Run, exc: Exception) -> store_pb.AppendRunEventRequest:
    """The history event of a message the broker did not take."""
    return store_pb.AppendRunEventRequest(
        run_id=run.run_id,
        kind="enqueue_failed",
        detail=f"{run.queue or DEFAULT_QUEUE}: {type(exc).__name__}: {exc}",
    )


def _unqueued(run: common_pb2.Run, exc: Exception) -> Unavailable:
    return Unavailable(
        f"run '{run.run_id}' is recorded but could not be queued on "
        f"'{run.queue or DEFAULT_QUEUE}': {exc}; the broker (CRONWAVE_REDIS_URL) is unreachable"
    )


def _abort_like(context: grpc.ServicerContext, exc: grpc.RpcError) -> NoReturn:
    """End the call with the store's status code, message and details, unchanged."""
    context.abort_with_status(relayed_status(exc))
    raise AssertionError("context.abort returned")  # it raises; this satisfies NoReturn
