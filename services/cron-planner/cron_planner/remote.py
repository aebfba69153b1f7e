"""The planner's calls to the dispatcher and the workflow-store, in planner terms.

Failures come back as cronwave errors the fire loop can act on without knowing gRPC:
``Unavailable`` for anything worth retrying (the outcome is unknown or the peer is
away), ``FailedPrecondition`` for a refused fencing token, and other
``CronwaveError`` kinds for requests that will never succeed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import grpc

from cronwave.v1 import common_pb2
from cronwave.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.convert import dt_to_ts, ts_to_dt
from cronwave_core.errors import CronwaveError, Unavailable
from cronwave_core.rpc import error_from_rpc

FENCING_SCOPE = "planner"

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
_PLANNED = (common_pb2.TRIGGER_KIND_SCHEDULED, common_pb2.TRIGGER_KIND_CATCHUP)


def _error(exc: grpc.RpcError, peer: str) -> CronwaveError:
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    if code in _TRANSIENT:
        details = exc.details() if hasattr(exc, "details") else str(exc)
        return Unavailable(f"{peer}: {code.name}: {details}")
    return error_from_rpc(exc)


def idempotency_key(schedule_id: str, fire_time: datetime) -> str:
    """The key of a scheduled fire: the same on every planner replica."""
    return f"{schedule_id}@{fire_time.isoformat()}"


class DispatcherClient:
    def __init__(self, channel: grpc.Channel, timeout: timedelta) -> None:
        self._stub = dispatcher_grpc.DispatcherServiceStub(channel)
        self._timeout = timeout.total_seconds()

    def start_run(self, schedule_id: str, fire_time: datetime, token: int) -> str:
        """Start the run of one scheduled fire; returns its run id (also when the
        dispatcher already had it: a repeated start is harmless)."""
        request = dispatcher_pb.StartRunRequest(
            schedule_id=schedule_id,
            fire_time=dt_to_ts(fire_time),
            fencing_token=token,
            fencing_scope=FENCING_SCOPE,
            idempotency_key=idempotency_key(schedule_id, fire_time),
            trigger=common_pb2.TRIGGER_KIND_SCHEDULED,
        )
        try:
            reply = self._stub.StartRun(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _error(exc, "dispatcher") from exc
        return str(reply.run.run_id)


class StoreClient:
    def __init__(self, channel: grpc.Channel, timeout: timedelta) -> None:
        self._stub = store_grpc.WorkflowStoreServiceStub(channel)
        self._timeout = timeout.total_seconds()

    def record_missed(self, schedule_id: str, fire_time: datetime, reason: str, token: int) -> None:
        request = store_pb.RecordMissedRequest(
            schedule_id=schedule_id,
            fire_time=dt_to_ts(fire_time),
            reason=reason,
            fencing_token=token,
            fencing_scope=FENCING_SCOPE,
        )
        try:
            self._stub.RecordMissed(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _error(exc, "workflow-store") from exc

    def newest_fire_time(self, schedule_id: str) -> datetime | None:
        """The latest fire time of a scheduled (or catch-up) run the store has for the
        schedule, missed ones included; None when it has none."""
        request = store_pb.ListRunsRequest(schedule_id=schedule_id, limit=20)
        try:
            reply = self._stub.ListRuns(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _error(exc, "workflow-store") from exc
        times = [ts_to_dt(r.fire_time) for r in reply.runs if r.trigger in _PLANNED]
        return max(times, default=None)
