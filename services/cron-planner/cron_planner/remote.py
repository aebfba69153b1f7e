"""The planner's calls to the dispatcher, the workflow-store and leader-election, in
planner terms.

Failures come back as cronwave errors the fire loop can act on without knowing gRPC:
``Unavailable`` for anything worth retrying (the outcome is unknown or the peer is
away), ``FailedPrecondition`` for a refused fencing token, and other
``CronwaveError`` kinds for requests that will never succeed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import grpc
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cron_planner.ports import Start
from cron_planner.work import InFlight, Missed, Trigger
from cronwave_core.convert import dt_to_ts, ts_to_dt
from cronwave_core.domain.runs import IN_FLIGHT, RUN_STATES, TRIGGERS, RunState
from cronwave_core.errors import CronwaveError, Unavailable
from cronwave_core.rpc import error_from_item, error_from_rpc

FENCING_SCOPE = "planner"
LATEST_PAGE = 10_000
PENDING_PAGE = 5_000
MISSED_BATCH = 500
IN_FLIGHT_LIMIT = 100  # more runs of one schedule in flight than this is a runaway

# Codes after which the same request may well succeed later.
_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.CANCELLED,
}


_TRANSIENT_CODES = {code.value[0] for code in _TRANSIENT}


def _error(exc: grpc.RpcError, peer: str) -> CronwaveError:
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    if code in _TRANSIENT:
        details = exc.details() if hasattr(exc, "details") else str(exc)
        return Unavailable(f"{peer}: {code.name}: {details}")
    return error_from_rpc(exc)


def idempotency_key(schedule_id: str, fire_time: datetime) -> str:
    """The key of a planned fire: the same on every planner replica, whatever the
    trigger, so a slot has one run however often and by whom it is started."""
    return f"{schedule_id}@{fire_time.isoformat()}"


#: The scope and token a write of a schedule carries, given the term's token: the one
#: lease's (``single_fence``) or the schedule's shard's (``ShardElector.fence``; token
#: 0 when this planner does not hold that shard now).
Fence = Callable[[str, int], tuple[str, int]]


def single_fence(_schedule_id: str, token: int) -> tuple[str, int]:
    return FENCING_SCOPE, token


def not_held(schedule_id: str, scope: str) -> Unavailable:
    return Unavailable(
        f"schedule '{schedule_id}': this planner does not hold its shard ({scope}) now; "
        "the shard's holder plans it"
    )


class DispatcherClient:
    def __init__(
        self, channel: grpc.Channel, timeout: timedelta, fence: Fence = single_fence
    ) -> None:
        self._stub = dispatcher_grpc.DispatcherServiceStub(channel)
        self._timeout = timeout.total_seconds()
        self._fence = fence

    def start_runs(self, starts: Sequence[Start], token: int) -> list[str | CronwaveError]:
        """Start the runs of planned fires in one call; per fire its run id (also when
        the dispatcher already had it: a repeated start is harmless) or its refusal.
        A fire of a shard this planner does not hold is not sent (``Unavailable``)."""
        fenced = [(start, *self._fence(start.schedule_id, token)) for start in starts]
        sent = [(start, scope, t) for start, scope, t in fenced if t > 0]
        if len(sent) < len(fenced):
            answers = iter(self._start(sent) if sent else [])
            return [
                next(answers) if t > 0 else not_held(s.schedule_id, scope) for s, scope, t in fenced
            ]
        return self._start(sent)

    def _start(self, fenced: Sequence[tuple[Start, str, int]]) -> list[str | CronwaveError]:
        starts = [start for start, _scope, _token in fenced]
        request = dispatcher_pb.StartRunsRequest(
            starts=[
                dispatcher_pb.StartRunRequest(
                    schedule_id=start.schedule_id,
                    fire_time=dt_to_ts(start.fire_time),
                    fencing_token=token,
                    fencing_scope=scope,
                    idempotency_key=idempotency_key(start.schedule_id, start.fire_time),
                    trigger=start.trigger.to_proto(),
                    traceparent=start.traceparent,
                )
                for start, scope, token in fenced
            ]
        )
        try:
            reply = self._stub.StartRuns(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _error(exc, "dispatcher") from exc
        answers: list[str | CronwaveError] = []
        for result in reply.results:
            if result.HasField("error"):
                code = result.error.code
                if code in _TRANSIENT_CODES:
                    answers.append(Unavailable(f"dispatcher: {result.error.message}"))
                else:
                    answers.append(error_from_item(result.error))
            else:
                answers.append(str(result.started.run.run_id))
        if len(answers) != len(starts):
            raise Unavailable(
                f"dispatcher: answered {len(answers)} of {len(starts)} starts; retrying them"
            )
        return answers


class StoreClient:
    def __init__(
        self,
        channel: grpc.Channel,
        timeout: timedelta,
        fence: Fence = single_fence,
        keep: Callable[[str], bool] = lambda _schedule_id: True,
    ) -> None:
        """``fence``: the scope and token of each write; ``keep``: whether a schedule
        is this planner's (its shard held) when it reads where schedules stand."""
        self._stub = store_grpc.WorkflowStoreServiceStub(channel)
        self._timeout = timeout.total_seconds()
        self._fence = fence
        self._keep = keep

    def _call(self, method: grpc.UnaryUnaryMultiCallable, request: object) -> object:
        try:
            return method(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _error(exc, "workflow-store") from exc

    def record_missed(self, slots: Sequence[Missed], token: int) -> list[str]:
        """Record ``slots`` as MISSED (or as placeholders), in batches, one per fencing
        scope; returns the ids of schedules the store no longer has (their slots were
        left out). Slots of a shard this planner does not hold now are not written:
        the shard's holder plans them."""
        unknown: list[str] = []
        by_fence: dict[tuple[str, int], list[Missed]] = {}
        for slot in slots:
            scope, fenced = self._fence(slot.schedule_id, token)
            if fenced > 0 or token <= 0:
                by_fence.setdefault((scope, fenced), []).append(slot)
        for (scope, fenced), group in by_fence.items():
            unknown.extend(self._record_missed(group, scope, fenced))
        return unknown

    def _record_missed(self, slots: Sequence[Missed], scope: str, token: int) -> list[str]:
        unknown: list[str] = []
        for i in range(0, len(slots), MISSED_BATCH):
            request = store_pb.RecordMissedSlotsRequest(fencing_token=token, fencing_scope=scope)
            for slot in slots[i : i + MISSED_BATCH]:
                request.slots.add(
                    schedule_id=slot.schedule_id,
                    fire_time=dt_to_ts(slot.fire_time),
                    reason=slot.reason,
                    trigger=slot.trigger.to_proto(),
                )
            reply = self._call(self._stub.RecordMissedSlots, request)
            assert isinstance(reply, store_pb.RecordMissedSlotsResponse)
            unknown.extend(reply.unknown_schedules)
        return unknown

    def latest_fire_times(
        self, schedule_ids: Sequence[str] | None = None, until: datetime | None = None
    ) -> dict[str, tuple[datetime, int]]:
        """Every schedule's newest handled fire time and count of fire times at or
        before ``until`` (None: all; or only those of ``schedule_ids``, ``LATEST_PAGE``
        ids a call), page by page: one GROUP BY query each on the store's side."""
        if schedule_ids is not None:
            latest: dict[str, tuple[datetime, int]] = {}
            ids = sorted(schedule_ids)
            for start in range(0, len(ids), LATEST_PAGE):
                latest.update(self._latest(ids[start : start + LATEST_PAGE], until))
            return latest
        return self._latest((), until)

    def _latest(
        self, ids: Sequence[str], until: datetime | None
    ) -> dict[str, tuple[datetime, int]]:
        latest: dict[str, tuple[datetime, int]] = {}
        after = ""
        while True:
            request = store_pb.LatestFireTimesRequest(
                schedule_ids=ids,
                after_schedule_id=after,
                limit=LATEST_PAGE,
                until=None if until is None else dt_to_ts(until),
            )
            reply = self._call(self._stub.LatestFireTimes, request)
            assert isinstance(reply, store_pb.LatestFireTimesResponse)
            for entry in reply.entries:
                if self._keep(entry.schedule_id):
                    latest[entry.schedule_id] = (ts_to_dt(entry.fire_time), int(entry.fires))
            if len(reply.entries) < LATEST_PAGE:
                return latest
            after = reply.entries[-1].schedule_id

    def pending_fires(self) -> list[Missed]:
        """Every placeholder (see ``work``) of a live schedule, oldest run first."""
        found: list[Missed] = []
        after = ""
        while True:
            request = store_pb.ListPendingFiresRequest(after_run_id=after, limit=PENDING_PAGE)
            reply = self._call(self._stub.ListPendingFires, request)
            assert isinstance(reply, store_pb.ListPendingFiresResponse)
            for run in reply.runs:
                if not self._keep(run.schedule_id):
                    continue
                trigger = TRIGGERS.lookup(run.trigger) or Trigger.SCHEDULED
                found.append(Missed(run.schedule_id, ts_to_dt(run.fire_time), run.error, trigger))
            if len(reply.runs) < PENDING_PAGE:
                return found
            after = reply.runs[-1].run_id

    def in_flight(self, schedule_id: str) -> list[InFlight]:
        """The schedule's runs in flight, PENDING, WAITING or RUNNING (at most
        ``IN_FLIGHT_LIMIT``)."""
        return self.in_flight_many([schedule_id])[schedule_id]

    def in_flight_many(self, schedule_ids: Sequence[str]) -> dict[str, list[InFlight]]:
        """``in_flight`` of many schedules in one call (at most ``MISSED_BATCH`` each
        call); a schedule with nothing in flight maps to an empty list."""
        found: dict[str, list[InFlight]] = {sid: [] for sid in schedule_ids}
        ids = list(found)
        for start in range(0, len(ids), MISSED_BATCH):
            page = ids[start : start + MISSED_BATCH]
            request = store_pb.ListRunsRequest(
                schedule_ids=page,
                limit=IN_FLIGHT_LIMIT * len(page),
                states=[state.to_proto() for state in sorted(IN_FLIGHT)],
                lean=True,  # no payloads: a page of runs at their limits is megabytes
            )
            reply = self._call(self._stub.ListRuns, request)
            assert isinstance(reply, store_pb.ListRunsResponse)
            for r in reply.runs:
                found[r.schedule_id].append(
                    InFlight(
                        r.run_id,
                        (RUN_STATES.lookup(r.state) or RunState.PENDING).value,
                        r.attempt,
                        ts_to_dt(r.fire_time),
                        ts_to_dt(r.created_at) if r.HasField("created_at") else None,
                        ts_to_dt(r.claimed_at) if r.HasField("claimed_at") else None,
                    )
                )
        return found

    def cancel_run(self, run: InFlight, reason: str) -> bool:
        """Cancel ``run`` with ``reason`` (its worker's next heartbeat is refused, so
        the job stops). False when it had finished already."""
        request = store_pb.CancelRunRequest(run_id=run.run_id, reason=reason)
        reply = self._call(self._stub.CancelRun, request)
        assert isinstance(reply, store_pb.CancelRunResponse)
        return bool(reply.changed)


class LeaderClient:
    """Who holds the planner lease (to tell a caller which replica leads)."""

    def __init__(self, channel: grpc.Channel, timeout: timedelta, scope: str) -> None:
        self._stub = leader_grpc.LeaderElectionServiceStub(channel)
        self._timeout = timeout.total_seconds()
        self._scope = scope

    def holder(self) -> str:
        """The current holder's candidate name; "" when nobody leads or it is unknown."""
        try:
            reply = self._stub.Observe(
                leader_pb.ObserveRequest(scope=self._scope), timeout=self._timeout
            )
        except grpc.RpcError:
            return ""
        return str(reply.lease.holder)
