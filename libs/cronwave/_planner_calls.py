"""The client's calls to the planners and leader-election: backfills, the lease,
a planner's status and fire-time previews (``Client`` has them from here)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave._models import Lease, PlannerStatus, Schedule, _dt
from cronwave._spec_input import spec_of, timestamp
from cronwave_core.domain.spec import Interval, Overlap, Spec
from cronwave_core.errors import InvalidArgument

if TYPE_CHECKING:
    from cronwave._transport import Stubs

Resp = TypeVar("Resp")


class PlannerCalls:
    """What ``Client`` asks of the planners and leader-election."""

    if TYPE_CHECKING:
        _stubs: Stubs

        def _call(self, service: str, method: Callable[..., Resp], request: Any) -> Resp: ...

    def backfill(
        self,
        schedule_id: str,
        start: datetime,
        end: datetime,
        *,
        dry_run: bool = False,
        rate_per_second: float = 0.0,
        overlap: str | None = None,
    ) -> list[datetime]:
        """The schedule's fire times (UTC) with ``start <= t < end`` -- start inclusive,
        end exclusive, ``end`` not after now -- and, unless ``dry_run``, run them with
        trigger BACKFILL at ``rate_per_second`` starts a second (0: 10), through the
        schedule's overlap policy or ``overlap``. A fire time that already has a run
        keeps it; a MISSED one is run. Only the leading planner backfills: ask
        another replica and it raises ``FailedPrecondition`` naming the leader."""
        request = planner_pb.BackfillRequest(
            schedule_id=schedule_id,
            start=timestamp(start, "start"),
            end=timestamp(end, "end"),
            dry_run=dry_run,
            rate_per_second=rate_per_second,
        )
        if overlap:
            request.overlap = Overlap.parse(overlap).to_proto()
        resp = self._call("cron-planner", self._stubs.planner.Backfill, request)
        return [_dt(t) for t in resp.fire_times]

    # leader and planner ----------------------------------------------------------
    def leader(self, scope: str = "planner") -> Lease:
        """The current lease of ``scope``; ``Lease.held`` is False when nobody holds it."""
        resp = self._call(
            "leader-election",
            self._stubs.leader.Observe,
            leader_pb.ObserveRequest(scope=scope),
        )
        return Lease.from_proto(resp.lease)

    def planner_status(self) -> PlannerStatus:
        """The status of the planner replica at ``planner_addr`` (not necessarily
        the leader)."""
        resp = self._call(
            "cron-planner",
            self._stubs.planner.GetPlannerStatus,
            planner_pb.GetPlannerStatusRequest(),
        )
        return PlannerStatus.from_proto(resp)

    def preview(
        self,
        cron: str | Sequence[str] | Schedule | Spec = (),
        *,
        time_zone: str = "UTC",
        dst_gap: str | None = None,
        dst_repeat: str | None = None,
        exclude_dates: Iterable[date | str] = (),
        intervals: Iterable[Interval] = (),
        one_off: Iterable[datetime] = (),
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        max_runs: int = 0,
        jitter: timedelta | None = None,
        after: datetime | None = None,
        count: int = 5,
    ) -> list[datetime]:
        """The next ``count`` fire times (UTC) strictly after ``after`` (default: now),
        computed by the planner with the code it fires with. Pass a ``Spec`` or a
        ``Schedule`` as the first argument to preview it; the other spec arguments are
        then ignored. A ``Schedule`` with ``max_runs`` and no ``start_at`` counts from
        the fire times it has already had (runs and MISSED alike, as the planner
        counts them): once it reached ``max_runs`` it has none left."""
        if count < 1:
            raise InvalidArgument("count", f"must be at least 1, got {count}")
        if isinstance(cron, Schedule):
            spec = cron.spec
        elif isinstance(cron, Spec):
            spec = cron
        else:
            spec = spec_of(
                cron,
                time_zone=time_zone,
                dst_gap=dst_gap,
                dst_repeat=dst_repeat,
                exclude_dates=exclude_dates,
                intervals=intervals,
                one_off=one_off,
                start_at=start_at,
                end_at=end_at,
                max_runs=max_runs,
                jitter=jitter,
            )
        request = planner_pb.PreviewFireTimesRequest(
            spec=spec.to_proto(),
            after=timestamp(after or datetime.now(UTC), "after"),
            count=count,
        )
        resp = self._call("cron-planner", self._stubs.planner.PreviewFireTimes, request)
        times = [_dt(t) for t in resp.fire_times]
        if isinstance(cron, Schedule) and spec.max_runs and spec.start_at is None:
            times = times[: max(0, spec.max_runs - self._fires_handled(cron.schedule_id))]
        return times

    def _fires_handled(self, schedule_id: str) -> int:
        """How many fire times of the schedule the planners have handled."""
        request = store_pb.LatestFireTimesRequest(schedule_ids=[schedule_id])
        resp = self._call("workflow-store", self._stubs.store.LatestFireTimes, request)
        return sum(entry.fires for entry in resp.entries if entry.schedule_id == schedule_id)
