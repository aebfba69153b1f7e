"""gRPC adapter of ``CronPlannerService``."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime

import grpc
from cronwave_proto.v1 import cron_planner_service_pb2 as pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as pb_grpc

from cron_planner.app import PlannerStatus
from cron_planner.backfills import BackfillRequest, BackfillResult
from cronwave_core.convert import dt_to_ts, opt_ts, ts_to_dt
from cronwave_core.domain.calendar import fire_times, validate
from cronwave_core.domain.spec import Overlap, Spec
from cronwave_core.errors import InvalidArgument, Unimplemented
from cronwave_core.fields import schedule_id

MAX_PREVIEW = 1000


class CronPlannerServicer(pb_grpc.CronPlannerServiceServicer):
    def __init__(
        self,
        status: Callable[[], PlannerStatus],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        backfill: Callable[[BackfillRequest], BackfillResult] | None = None,
    ) -> None:
        self._status = status
        self._now = now
        self._backfill = backfill

    def GetPlannerStatus(
        self, request: pb.GetPlannerStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetPlannerStatusResponse:
        status = self._status()
        reply = pb.GetPlannerStatusResponse(
            candidate=status.candidate,
            leader=status.leader,
            fencing_token=status.fencing_token,
            schedules=status.schedules,
            next_schedule_id=status.next_schedule_id,
            fired=status.fired,
            revision=status.revision,
        )
        if status.next_fire_time is not None:
            reply.next_fire_time.CopyFrom(dt_to_ts(status.next_fire_time))
        return reply

    def PreviewFireTimes(
        self, request: pb.PreviewFireTimesRequest, context: grpc.ServicerContext
    ) -> pb.PreviewFireTimesResponse:
        if not 1 <= request.count <= MAX_PREVIEW:
            raise InvalidArgument(
                "count", f"must be between 1 and {MAX_PREVIEW}, got {request.count}"
            )
        spec = Spec.from_proto(request.spec)
        validate(spec)
        after = ts_to_dt(request.after, "after") if request.HasField("after") else self._now()
        times = itertools.islice(fire_times(spec, after), request.count)
        return pb.PreviewFireTimesResponse(fire_times=[dt_to_ts(t) for t in times])

    def Backfill(
        self, request: pb.BackfillRequest, context: grpc.ServicerContext
    ) -> pb.BackfillResponse:
        if self._backfill is None:
            raise Unimplemented("this planner does not backfill")
        result = self._backfill(
            BackfillRequest(
                schedule_id=schedule_id(request.schedule_id, required=False),
                start=opt_ts(request, "start"),
                end=opt_ts(request, "end"),
                dry_run=request.dry_run,
                rate_per_second=request.rate_per_second,
                overlap=_overlap(request.overlap),
            )
        )
        reply = pb.BackfillResponse(
            fire_times=[dt_to_ts(t) for t in result.fire_times],
            dst_skipped=[dt_to_ts(t) for t in result.dst_skipped],
            dry_run=result.dry_run,
        )
        if result.finishes_at is not None:
            reply.finishes_at.CopyFrom(dt_to_ts(result.finishes_at))
        return reply


def _overlap(value: int) -> Overlap | None:
    """The request's overlap override; None (UNSPECIFIED) keeps the schedule's."""
    if value == 0:
        return None
    return Overlap.from_proto(value, "overlap")
