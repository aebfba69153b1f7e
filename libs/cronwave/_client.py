"""The cronwave client: one object that talks to the store, dispatcher, planner and
leader-election over gRPC, with a deadline on every call."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave import _enums
from cronwave._errors import WaitTimeout
from cronwave._models import Lease, PlannerStatus, Run, RunEvent, Schedule, _dt
from cronwave.v1 import common_pb2 as pb
from cronwave.v1 import cron_planner_service_pb2 as planner_pb
from cronwave.v1 import cron_planner_service_pb2_grpc as planner_grpc
from cronwave.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave.v1 import leader_election_service_pb2 as leader_pb
from cronwave.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave.v1 import workflow_store_service_pb2_grpc as store_grpc
from cronwave_core.errors import CronwaveError, InvalidArgument, RunNotFound, Unavailable
from cronwave_core.rpc import error_from_rpc, open_channel
from cronwave_core.settings import DEFAULT_PORTS, Settings
from cronwave_core.spec import Interval

Resp = TypeVar("Resp")

_LOOPBACK = "127.0.0.1"
# A bound on one listing's pages (each holds at least one schedule).
_MAX_PAGES = 100_000


def _ts(value: datetime, field: str) -> Timestamp:
    if value.tzinfo is None:
        raise InvalidArgument(field, "must be a timezone-aware datetime (e.g. tzinfo=UTC)")
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def _duration(value: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(value)
    return d


def _spec(
    cron: str | Sequence[str],
    *,
    time_zone: str,
    dst_gap: str | None,
    dst_repeat: str | None,
    exclude_dates: Iterable[date | str],
    intervals: Iterable[Interval],
    one_off: Iterable[datetime],
    start_at: datetime | None,
    end_at: datetime | None,
    max_runs: int,
    jitter: timedelta | None,
) -> pb.ScheduleSpec:
    """The proto spec. Checks only what the proto cannot carry (names of enums,
    naive datetimes); the server validates the rest and names the field."""
    msg = pb.ScheduleSpec(
        cron=[cron] if isinstance(cron, str) else list(cron),
        time_zone=time_zone,
        dst_gap=_enums.parse_dst_gap(dst_gap),  # type: ignore[arg-type]
        dst_repeat=_enums.parse_dst_repeat(dst_repeat),  # type: ignore[arg-type]
        exclude_dates=[d if isinstance(d, str) else d.isoformat() for d in exclude_dates],
        max_runs=max_runs,
        intervals=[
            pb.IntervalSpec(every=_duration(iv.every), phase=_duration(iv.phase))
            for iv in intervals
        ],
        one_off=[_ts(t, f"spec.one_off[{i}]") for i, t in enumerate(one_off)],
    )
    if start_at is not None:
        msg.start_at.CopyFrom(_ts(start_at, "spec.start_at"))
    if end_at is not None:
        msg.end_at.CopyFrom(_ts(end_at, "spec.end_at"))
    if jitter is not None:
        msg.jitter.CopyFrom(_duration(jitter))
    return msg


def _schedule_spec(schedule: Schedule) -> pb.ScheduleSpec:
    return _spec(
        schedule.cron,
        time_zone=schedule.time_zone,
        dst_gap=schedule.dst_gap,
        dst_repeat=schedule.dst_repeat,
        exclude_dates=schedule.exclude_dates,
        intervals=schedule.intervals,
        one_off=schedule.one_off,
        start_at=schedule.start_at,
        end_at=schedule.end_at,
        max_runs=schedule.max_runs,
        jitter=schedule.jitter,
    )


class Client:
    """A connection to a cronwave suite.

    Every call has a deadline (``timeout``) and raises a ``CronwaveError`` subclass
    on failure: ``InvalidArgument`` naming the field, ``NotFound``, ``Unavailable``
    when a service cannot be reached in time, and so on. Use it as a context
    manager, or call ``close()``, to close its channels.
    """

    def __init__(
        self,
        *,
        store_addr: str = f"{_LOOPBACK}:{DEFAULT_PORTS['store']}",
        dispatcher_addr: str = f"{_LOOPBACK}:{DEFAULT_PORTS['dispatcher']}",
        planner_addr: str = f"{_LOOPBACK}:{DEFAULT_PORTS['planner']}",
        leader_addr: str = f"{_LOOPBACK}:{DEFAULT_PORTS['leader']}",
        timeout: timedelta = timedelta(seconds=5),
    ) -> None:
        if timeout <= timedelta(0):
            raise InvalidArgument("timeout", "must be a positive duration")
        self.timeout = timeout
        self._addrs = {
            "workflow-store": store_addr,
            "dispatcher": dispatcher_addr,
            "cron-planner": planner_addr,
            "leader-election": leader_addr,
        }
        self._channels = {name: open_channel(addr, timeout) for name, addr in self._addrs.items()}
        self._store = store_grpc.WorkflowStoreServiceStub(self._channels["workflow-store"])
        self._dispatcher = dispatcher_grpc.DispatcherServiceStub(self._channels["dispatcher"])
        self._planner = planner_grpc.CronPlannerServiceStub(self._channels["cron-planner"])
        self._leader = leader_grpc.LeaderElectionServiceStub(self._channels["leader-election"])

    @classmethod
    def from_settings(cls, settings: Settings) -> Client:
        """A client for the addresses and RPC timeout in ``settings``
        (``CRONWAVE_STORE_ADDR``, ..., ``CRONWAVE_RPC_TIMEOUT``)."""
        return cls(
            store_addr=settings.store_addr,
            dispatcher_addr=settings.dispatcher_addr,
            planner_addr=settings.planner_addr,
            leader_addr=settings.leader_addr,
            timeout=settings.rpc_timeout,
        )

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(store_addr={self._addrs['workflow-store']!r}, ...)"

    # calls ---------------------------------------------------------------------
    def _call(self, service: str, method: Callable[..., Resp], request: Any) -> Resp:
        try:
            return method(request)
        except grpc.RpcError as exc:
            raise self._error(service, exc) from exc

    def _error(self, service: str, exc: grpc.RpcError) -> CronwaveError:
        code = exc.code() if hasattr(exc, "code") else None
        where = f"{service} at {self._addrs[service]}"
        if code == grpc.StatusCode.UNAVAILABLE:
            details = exc.details() if hasattr(exc, "details") else ""
            return Unavailable(f"{where} is unavailable: {details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return Unavailable(
                f"{where} did not answer within {self.timeout.total_seconds():g}s "
                "(deadline exceeded); it may be overloaded or stopped"
            )
        return error_from_rpc(exc)

    # schedules -----------------------------------------------------------------
    def create_schedule(
        self,
        schedule_id: str,
        *,
        cron: str | Sequence[str] = (),
        time_zone: str = "UTC",
        job_type: str,
        payload: dict[str, Any] | None = None,
        paused: bool = False,
        dst_gap: str | None = None,
        dst_repeat: str | None = None,
        overlap: str | None = None,
        catchup: str | None = None,
        catchup_window: timedelta | None = None,
        catchup_max_runs: int = 0,
        exclude_dates: Iterable[date | str] = (),
        intervals: Iterable[Interval] = (),
        one_off: Iterable[datetime] = (),
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        max_runs: int = 0,
        jitter: timedelta | None = None,
    ) -> Schedule:
        """Create a schedule; it fires by the union of its cron expressions (read in
        ``time_zone``), intervals and one-off instants, within ``[start_at, end_at)``,
        at most ``max_runs`` times (0: no limit).

        Policies are names: ``dst_gap`` shift|skip, ``dst_repeat`` once|last|twice,
        ``overlap`` skip|buffer_one|buffer_all|cancel_other|allow_all, ``catchup``
        skip|latest|all; ``None`` leaves the server's default. After downtime, slots
        late by more than ``catchup_window`` (default 10 minutes) are recorded MISSED;
        ``catchup="all"`` runs at most ``catchup_max_runs`` (0: the default, 100) of
        the others. ``jitter`` delays each start by a deterministic amount below it
        (the nominal fire time is unchanged). ``job_type`` must be registered by a
        worker. Raises ``InvalidArgument`` naming the bad field (nothing is written)
        and ``AlreadyExists`` when the id is taken.
        """
        try:
            payload_json = json.dumps({} if payload is None else payload)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument("payload", f"must be JSON-serializable data: {exc}") from exc
        policy = pb.SchedulePolicy(
            overlap=_enums.parse_overlap(overlap),  # type: ignore[arg-type]
            catchup=_enums.parse_catchup(catchup),  # type: ignore[arg-type]
        )
        if catchup_window is not None:
            policy.catchup_window.CopyFrom(_duration(catchup_window))
        if catchup_max_runs:
            policy.catchup_max_runs = catchup_max_runs
        schedule = pb.Schedule(
            schedule_id=schedule_id,
            spec=_spec(
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
            ),
            policy=policy,
            job_type=job_type,
            payload_json=payload_json,
            paused=paused,
        )
        resp = self._call(
            "workflow-store",
            self._store.CreateSchedule,
            store_pb.CreateScheduleRequest(schedule=schedule),
        )
        return Schedule.from_proto(resp.schedule)

    def get_schedule(self, schedule_id: str) -> Schedule:
        resp = self._call(
            "workflow-store",
            self._store.GetSchedule,
            store_pb.GetScheduleRequest(schedule_id=schedule_id),
        )
        return Schedule.from_proto(resp.schedule)

    def list_schedules(self, *, limit: int = 0, include_deleted: bool = False) -> list[Schedule]:
        """Schedules in the store's order; ``limit`` 0 means all. Read a page at a time
        (the store ends a page by bytes too, so a short page is not the last one)."""
        if limit < 0:
            raise InvalidArgument("limit", f"must not be negative (0 means all), got {limit}")
        schedules: list[Schedule] = []
        after = ""
        for _ in range(_MAX_PAGES):
            request = store_pb.ListSchedulesRequest(
                limit=limit - len(schedules) if limit else 0,
                include_deleted=include_deleted,
                after_schedule_id=after,
            )
            resp = self._call("workflow-store", self._store.ListSchedules, request)
            if not resp.schedules:
                return schedules
            schedules.extend(Schedule.from_proto(s) for s in resp.schedules)
            if limit and len(schedules) >= limit:
                return schedules
            after = resp.schedules[-1].schedule_id
        raise Unavailable(f"the schedule list did not end within {_MAX_PAGES} pages")

    def pause_schedule(self, schedule_id: str, note: str = "") -> Schedule:
        """Stop firing ``schedule_id`` until resumed; its slots meanwhile are not run."""
        resp = self._call(
            "workflow-store",
            self._store.PauseSchedule,
            store_pb.PauseScheduleRequest(schedule_id=schedule_id, note=note),
        )
        return Schedule.from_proto(resp.schedule)

    def resume_schedule(self, schedule_id: str, note: str = "") -> Schedule:
        resp = self._call(
            "workflow-store",
            self._store.ResumeSchedule,
            store_pb.ResumeScheduleRequest(schedule_id=schedule_id, note=note),
        )
        return Schedule.from_proto(resp.schedule)

    def delete_schedule(self, schedule_id: str) -> Schedule:
        """Delete ``schedule_id``; its runs and their history stay."""
        resp = self._call(
            "workflow-store",
            self._store.DeleteSchedule,
            store_pb.DeleteScheduleRequest(schedule_id=schedule_id),
        )
        return Schedule.from_proto(resp.schedule)

    # runs ----------------------------------------------------------------------
    def trigger(self, schedule_id: str, *, idempotency_key: str = "") -> Run:
        """Start a run of ``schedule_id`` now, outside its calendar. Each call is a
        new run, unless ``idempotency_key`` repeats one: then that run is returned."""
        resp = self._call(
            "dispatcher",
            self._dispatcher.TriggerRun,
            dispatcher_pb.TriggerRunRequest(
                schedule_id=schedule_id, idempotency_key=idempotency_key
            ),
        )
        return Run.from_proto(resp.run)

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
            start=_ts(start, "start"),
            end=_ts(end, "end"),
            dry_run=dry_run,
            rate_per_second=rate_per_second,
            overlap=_enums.parse_overlap(overlap),  # type: ignore[arg-type]
        )
        resp = self._call("cron-planner", self._planner.Backfill, request)
        return [_dt(t) for t in resp.fire_times]

    def get_run(self, run_id: str) -> Run:
        resp = self._call(
            "workflow-store",
            self._store.GetRuns,
            store_pb.GetRunsRequest(runs=[store_pb.GetRunRequest(run_id=run_id)]),
        )
        for run in resp.runs:  # a run the store does not have is left out
            return Run.from_proto(run)
        raise RunNotFound(run_id)

    def list_runs(
        self,
        schedule_id: str | None = None,
        *,
        limit: int = 50,
        states: Iterable[str] = (),
    ) -> list[Run]:
        """Runs, newest first: of one schedule or of all, optionally only in ``states``
        (names such as ``"FAILED"``)."""
        if limit < 1:
            raise InvalidArgument("limit", f"must be at least 1, got {limit}")
        request = store_pb.ListRunsRequest(
            schedule_id=schedule_id or "",
            limit=limit,
            states=[_enums.parse_state(s, f"states[{i}]") for i, s in enumerate(states)],  # type: ignore[misc]
        )
        resp = self._call("workflow-store", self._store.ListRuns, request)
        return [Run.from_proto(r) for r in resp.runs]

    def run_events(self, run_id: str) -> list[RunEvent]:
        """The run's history, oldest first."""
        resp = self._call(
            "workflow-store",
            self._store.ListRunEvents,
            store_pb.ListRunEventsRequest(run_id=run_id),
        )
        return [RunEvent.from_proto(e) for e in resp.events]

    def wait_run(
        self,
        run_id: str,
        timeout: timedelta = timedelta(seconds=60),
        *,
        poll: timedelta = timedelta(milliseconds=200),
    ) -> Run:
        """Poll ``run_id`` until it is terminal (SUCCEEDED, FAILED, TIMED_OUT, MISSED,
        CANCELLED, DEAD_LETTERED) and return it. A run that ends in failure is
        returned, not raised. Raises ``WaitTimeout`` when ``timeout`` passes first;
        the run itself is not affected."""
        deadline = time.monotonic() + timeout.total_seconds()
        interval = max(poll.total_seconds(), 0.01)
        while True:
            run = self.get_run(run_id)
            if run.terminal:
                return run
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(run, timeout)
            time.sleep(min(interval, remaining))

    # leader and planner ----------------------------------------------------------
    def leader(self, scope: str = "planner") -> Lease:
        """The current lease of ``scope``; ``Lease.held`` is False when nobody holds it."""
        resp = self._call(
            "leader-election",
            self._leader.Observe,
            leader_pb.ObserveRequest(scope=scope),
        )
        return Lease.from_proto(resp.lease)

    def planner_status(self) -> PlannerStatus:
        """The status of the planner replica at ``planner_addr`` (not necessarily
        the leader)."""
        resp = self._call(
            "cron-planner",
            self._planner.GetPlannerStatus,
            planner_pb.GetPlannerStatusRequest(),
        )
        return PlannerStatus.from_proto(resp)

    def preview(
        self,
        cron: str | Sequence[str] | Schedule = (),
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
        computed by the planner with the code it fires with. Pass a ``Schedule`` as
        the first argument to preview its spec; the other spec arguments are then
        ignored."""
        if count < 1:
            raise InvalidArgument("count", f"must be at least 1, got {count}")
        if isinstance(cron, Schedule):
            spec = _schedule_spec(cron)
        else:
            spec = _spec(
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
            spec=spec,
            after=_ts(after or datetime.now(UTC), "after"),
            count=count,
        )
        resp = self._call("cron-planner", self._planner.PreviewFireTimes, request)
        return [_dt(t) for t in resp.fire_times]
