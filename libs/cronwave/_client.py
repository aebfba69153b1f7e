"""The cronwave client: one object that talks to the store, dispatcher, planner and
leader-election over gRPC, with a deadline on every call."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from google.protobuf import field_mask_pb2

from cronwave import _enums
from cronwave._audit_calls import _PAGE, AuditCalls
from cronwave._deadline_calls import DeadlineCalls
from cronwave._errors import WaitTimeout
from cronwave._models import Run, RunEvent, Schedule
from cronwave._planner_calls import PlannerCalls
from cronwave._spec_input import policy_of, spec_of, whole_or_keywords
from cronwave._update_input import update_of
from cronwave_core.domain.cancel import CancelRequest
from cronwave_core.domain.labels import labels_value
from cronwave_core.domain.spec import Interval, Policy, Spec
from cronwave_core.errors import (
    SDK,
    CronwaveError,
    InvalidArgument,
    RunNotFound,
    Unavailable,
)
from cronwave_core.fields import require_run_id

if TYPE_CHECKING:
    from cronwave_core.settings import NetworkSettings, TlsSettings

Resp = TypeVar("Resp")
_MAX_PAGES = 100_000  # a bound on one listing's pages (each holds at least one schedule)


class _Given:
    """The settings of a client that was given every address and its timeout."""

    store_addr = dispatcher_addr = planner_addr = leader_addr = ""
    rpc_timeout = timedelta(seconds=5)


#: The variable of each service's address, by the name ``_addrs`` gives it.
_ADDRESS_VARS = {
    "workflow-store": "CRONWAVE_STORE_ADDR",
    "dispatcher": "CRONWAVE_DISPATCHER_ADDR",
    "cron-planner": "CRONWAVE_PLANNER_ADDR",
    "leader-election": "CRONWAVE_LEADER_ADDR",
}


def _suite_env(given: Mapping[str, str | None]) -> tuple[dict[str, str], CronwaveError | None]:
    """The environment over the suite it leads to (``cronwave._suite_find``), the
    addresses ``given`` (by service) counting as set; and, when some address is set but
    there is no suite to take the others from, why not (``SuiteNotRunning``, raised
    when no address is set at all: such a client could reach nothing)."""
    from cronwave import _suite_find, _suite_record  # on the first client, not the import

    environ = {
        **os.environ,
        **{_ADDRESS_VARS[name]: addr for name, addr in given.items() if addr},
    }
    try:
        return _suite_find.suite_env(environ), None
    except _suite_record.SuiteNotRunning as exc:
        if not any(environ.get(var) for var in _ADDRESS_VARS.values()):
            raise
        return environ, exc


def _from_env(env: Mapping[str, str] | None) -> NetworkSettings | _Given:
    """``NetworkSettings`` from ``env``; None (the client was given everything): no
    environment is read."""
    if env is None:
        return _Given()
    from cronwave_core.settings import NetworkSettings

    return NetworkSettings.from_env(env)


class Client(AuditCalls, PlannerCalls, DeadlineCalls):
    """A connection to a cronwave suite.

    Every call has a deadline (``timeout``) and raises a ``CronwaveError`` subclass
    on failure, the very class the server refused it with: ``InvalidArgument`` naming
    the field, ``ScheduleNotFound``, ``ScheduleExists``, ``Unavailable`` when a
    service cannot be reached in time, and so on; a message's hint of what to
    do next names calls and keywords (``if_absent=True``), never the CLI's flags. Use
    it as a context manager, or call ``close()``, to close its channels.
    """

    #: The surface whose words the errors' hints speak (``CronwaveError.hinted``).
    _surface = SDK

    def __init__(
        self,
        *,
        store_addr: str | None = None,
        dispatcher_addr: str | None = None,
        planner_addr: str | None = None,
        leader_addr: str | None = None,
        timeout: timedelta | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        """Each address not given is read from its variable (``CRONWAVE_STORE_ADDR``,
        ``CRONWAVE_DISPATCHER_ADDR``, ``CRONWAVE_PLANNER_ADDR``,
        ``CRONWAVE_LEADER_ADDR``), else it is the one recorded by the running suite of
        the data dir (``CRONWAVE_DATA_DIR``, else ``$XDG_STATE_HOME/cronwave`` or
        ``~/.local/state/cronwave``); ``timeout`` likewise from
        ``CRONWAVE_RPC_TIMEOUT``, else 5 s. ``tls``: the certificates and the API key
        to call with (None: from ``CRONWAVE_TLS_*`` and ``CRONWAVE_TOKEN``, else the
        local administrator's certificate in that suite's TLS dir). A malformed
        variable raises ``ConfigurationError`` naming it. An address to be taken from a
        data dir that holds no running suite is a ``FailedPrecondition`` naming the
        file looked for: raised here when no address is given at all, else by the
        first call to a service left without one (a client given only ``store_addr``
        still makes the store's calls)."""
        given = {
            "workflow-store": store_addr,
            "dispatcher": dispatcher_addr,
            "cron-planner": planner_addr,
            "leader-election": leader_addr,
        }
        env, lookup = (None, None)
        if timeout is None or any(addr is None for addr in given.values()):
            env, lookup = _suite_env(given)
        from_env = _from_env(env)
        timeout = from_env.rpc_timeout if timeout is None else timeout
        if timeout <= timedelta(0):
            raise InvalidArgument("timeout", "must be a positive duration")
        self.timeout = timeout
        self._addrs = {
            "workflow-store": store_addr or from_env.store_addr,
            "dispatcher": dispatcher_addr or from_env.dispatcher_addr,
            "cron-planner": planner_addr or from_env.planner_addr,
            "leader-election": leader_addr or from_env.leader_addr,
        }
        # An address neither given nor found: its calls say where it was looked for.
        unreached: dict[str, CronwaveError] = {}
        if lookup is not None and env is not None:
            for name, var in _ADDRESS_VARS.items():
                if not (given[name] or env.get(var)):
                    self._addrs[name] = "(no address)"
                    unreached[name] = type(lookup)(
                        f"no address for the {name}: {var} unset, and {lookup.message}"
                    )
        from cronwave import _transport  # grpc: loaded by the first client, not the import

        self._transport = _transport
        if tls is None:
            from cronwave_core.settings import TlsSettings

            tls = TlsSettings.from_env(env)
        self._stubs = _transport.connect(self._addrs, timeout, tls, unreached)
        self._store = self._stubs.store
        self._dispatcher = self._stubs.dispatcher
        self._planner = self._stubs.planner
        self._leader = self._stubs.leader

    @classmethod
    def from_settings(cls, settings: NetworkSettings, tls: TlsSettings | None = None) -> Client:
        """A client for the addresses and RPC timeout in ``settings``
        (``CRONWAVE_STORE_ADDR``, ..., ``CRONWAVE_RPC_TIMEOUT``), with ``tls`` (see
        ``__init__``)."""
        return cls(
            tls=tls,
            store_addr=settings.store_addr,
            dispatcher_addr=settings.dispatcher_addr,
            planner_addr=settings.planner_addr,
            leader_addr=settings.leader_addr,
            timeout=settings.rpc_timeout,
        )

    def close(self) -> None:
        self._stubs.close()

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
        except self._transport.RpcError as exc:
            where = f"{service} at {self._addrs[service]}"
            error = self._transport.call_error(where, self.timeout, exc)
            raise error.hinted(self._surface) from exc

    # schedules -----------------------------------------------------------------
    def create_schedule(
        self,
        schedule_id: str,
        spec: Spec | None = None,
        policy: Policy | None = None,
        *,
        job_type: str,
        payload: dict[str, Any] | None = None,
        paused: bool = False,
        cron: str | Sequence[str] = (),
        time_zone: str = "UTC",
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
        deadline: timedelta | None = None,
        notify: Sequence[str] = (),
        notify_format: str | None = None,
        trace_sample: float | None = None,
        labels: Mapping[str, str] | None = None,
        if_absent: bool = False,
    ) -> Schedule:
        """Create a schedule that fires by ``spec`` and acts by ``policy``::

            client.create_schedule(
                "nightly-billing",
                Spec(cron=("0 2 * * *",), time_zone="Europe/Berlin"),
                Policy(overlap=Overlap.SKIP),
                job_type="billing.nightly",
            )

        A ``Spec`` fires by the union of its cron expressions (read in its
        ``time_zone``), intervals and one-off instants, within ``[start_at, end_at)``,
        at most ``max_runs`` times (0: no limit). After downtime, slots late by more
        than the policy's ``catchup_window`` are recorded MISSED; ``Catchup.ALL`` runs
        at most ``catchup_max_runs`` of the others. ``jitter`` delays each start by a
        deterministic amount below it (the nominal fire time is unchanged).
        ``deadline``: each slot must have SUCCEEDED within it of its fire time; a
        breach is sent to the ``notify`` webhooks (http(s) URLs; ``notify_format``
        ``json`` or ``slack``) and listed by ``deadline_breaches``. ``trace_sample``:
        the share of runs traced whole, 0..1 (default 1: every run); a run not sampled
        is traced by its worker only when it fails, is retried or starts late.
        ``labels``: its owners' ``key=value`` pairs; ``{"critical": "true"}`` marks a
        schedule whose slots must succeed (an alert pages when they do not; every run
        of it is traced).

        The same fields may be given as keywords instead (``cron="0 2 * * *",
        overlap="skip"``), each policy by the value of its enum (``DstGap``,
        ``DstRepeat``, ``Overlap``, ``Catchup``; ``"buffer_one"`` for
        ``Overlap.BUFFER_ONE``); ``None`` and 0 are the defaults. A spec or policy
        is given whole or by keywords, not both. ``job_type`` must be registered by a
        worker. Raises ``InvalidArgument`` naming the bad field (nothing is written)
        and ``AlreadyExists`` when the id is taken -- unless ``if_absent``: then the
        schedule of that id is returned as it is, unchanged (the request is still
        validated).
        """
        spec = whole_or_keywords(
            "spec",
            spec,
            spec_of(
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
            given=any(v is not None for v in (dst_gap, dst_repeat, start_at, end_at, jitter))
            or bool(cron or exclude_dates or intervals or one_off or max_runs)
            or time_zone != "UTC",
        )
        policy = whole_or_keywords(
            "policy",
            policy,
            policy_of(
                overlap=overlap,
                catchup=catchup,
                catchup_window=catchup_window,
                catchup_max_runs=catchup_max_runs,
                deadline=deadline,
                notify=notify,
                notify_format=notify_format,
                trace_sample=trace_sample,
            ),
            given=any(
                v is not None for v in (overlap, catchup, catchup_window, deadline, trace_sample)
            )
            or catchup_max_runs != 0
            or bool(notify),
        )
        try:
            payload_json = json.dumps({} if payload is None else payload)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument("payload", f"must be JSON-serializable data: {exc}") from exc
        schedule = pb.Schedule(
            schedule_id=schedule_id,
            spec=spec.to_proto(),
            policy=policy.to_proto(),
            job_type=job_type,
            payload_json=payload_json,
            paused=paused,
            labels=dict(labels_value(labels or {})),
        )
        return self._create(schedule, if_absent=if_absent)[0]

    def _create(self, schedule: pb.Schedule, *, if_absent: bool) -> tuple[Schedule, bool]:
        """CreateSchedule: the schedule, and whether this call created it."""
        resp = self._call(
            "workflow-store",
            self._store.CreateSchedule,
            store_pb.CreateScheduleRequest(schedule=schedule, if_absent=if_absent),
        )
        return Schedule.from_proto(resp.schedule), resp.created

    def update_schedule(
        self,
        schedule_id: str,
        spec: Spec | None = None,
        policy: Policy | None = None,
        *,
        job_type: str | None = None,
        payload: dict[str, Any] | None = None,
        cron: str | Sequence[str] | None = None,
        time_zone: str | None = None,
        dst_gap: str | None = None,
        dst_repeat: str | None = None,
        overlap: str | None = None,
        catchup: str | None = None,
        catchup_window: timedelta | None = None,
        catchup_max_runs: int | None = None,
        exclude_dates: Iterable[date | str] | None = None,
        intervals: Iterable[Interval] | None = None,
        one_off: Iterable[datetime] | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        max_runs: int | None = None,
        jitter: timedelta | None = None,
        deadline: timedelta | None = None,
        notify: Sequence[str] | None = None,
        notify_format: str | None = None,
        trace_sample: float | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Schedule:
        """Change the fields given (not ``None``) of a live schedule, in place; every
        other field keeps its value. ``spec`` or ``policy`` replaces that value whole;
        the keywords are those of ``create_schedule`` and change one field each
        (``cron=...`` keeps the zone). Validated as a create is, all or nothing:
        ``InvalidArgument`` names the bad field and the schedule is unchanged;
        ``ScheduleNotFound`` for an unknown or deleted schedule.

        The planner re-plans it from the moment of the change: a slot already run is
        never run again, and a calendar change does not count the slots between the
        old and the new calendar as missed. A run recorded before the change keeps the
        payload and job type it was recorded with. ``notify`` replaces the webhooks,
        ``labels`` the labels (``{}``: none).
        """
        msg, paths = update_of(
            schedule_id,
            spec,
            policy,
            job_type=job_type,
            payload=payload,
            cron=cron,
            time_zone=time_zone,
            dst_gap=dst_gap,
            dst_repeat=dst_repeat,
            overlap=overlap,
            catchup=catchup,
            catchup_window=catchup_window,
            catchup_max_runs=catchup_max_runs,
            exclude_dates=exclude_dates,
            intervals=intervals,
            one_off=one_off,
            start_at=start_at,
            end_at=end_at,
            max_runs=max_runs,
            jitter=jitter,
            deadline=deadline,
            notify=notify,
            notify_format=notify_format,
            trace_sample=trace_sample,
            labels=labels,
        )
        return self._update(msg, paths)[0]

    def _update(self, schedule: pb.Schedule, paths: Sequence[str]) -> tuple[Schedule, bool]:
        """UpdateSchedule of ``paths``: the schedule, and whether anything changed."""
        resp = self._call(
            "workflow-store",
            self._store.UpdateSchedule,
            store_pb.UpdateScheduleRequest(
                schedule=schedule, update_mask=field_mask_pb2.FieldMask(paths=list(paths))
            ),
        )
        return Schedule.from_proto(resp.schedule), resp.changed

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
                limit=min(limit - len(schedules), _PAGE) if limit else 0,
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

    def delete_schedule(self, schedule_id: str, *, force: bool = False) -> Schedule:
        """Delete ``schedule_id``; its runs and their history stay. A schedule with a
        run in flight (PENDING, WAITING or RUNNING) is refused with ``FailedPrecondition``
        naming the run, unless ``force``: then those runs are cancelled (error
        ``schedule deleted``) in the same transaction as the deletion."""
        return self._delete(schedule_id, force=force)[0]

    def _delete(self, schedule_id: str, *, force: bool) -> tuple[Schedule, list[Run]]:
        """DeleteSchedule: the deleted schedule and the runs ``force`` cancelled."""
        resp = self._call(
            "workflow-store",
            self._store.DeleteSchedule,
            store_pb.DeleteScheduleRequest(schedule_id=schedule_id, force=force),
        )
        return Schedule.from_proto(resp.schedule), [Run.from_proto(r) for r in resp.cancelled]

    def _job_type_names(self) -> list[str]:
        """The job types registered with the store, by name."""
        resp = self._call(
            "workflow-store", self._store.ListJobTypes, store_pb.ListJobTypesRequest()
        )
        return sorted(job.name for job in resp.job_types)

    # runs ----------------------------------------------------------------------
    def trigger(
        self,
        schedule_id: str,
        *,
        idempotency_key: str = "",
        payload: Mapping[str, Any] | None = None,
    ) -> Run:
        """Start a run of ``schedule_id`` now, outside its calendar. Each call is a
        new run, unless ``idempotency_key`` repeats one: then that run is returned (with
        the payload it was started with). ``payload``: this run's own input instead of
        the schedule's (which is unchanged); ``InvalidArgument`` when it is not
        JSON-serializable or over the payload limit."""
        payload_json = ""
        if payload is not None:
            try:
                payload_json = json.dumps(dict(payload))
            except (TypeError, ValueError) as exc:
                raise InvalidArgument("payload", f"must be JSON-serializable data: {exc}") from exc
        resp = self._call(
            "dispatcher",
            self._dispatcher.TriggerRun,
            dispatcher_pb.TriggerRunRequest(
                schedule_id=schedule_id, idempotency_key=idempotency_key, payload_json=payload_json
            ),
        )
        return Run.from_proto(resp.run)

    def get_run(self, run_id: str) -> Run:
        """The run as the store has it. Raises ``InvalidArgument`` (``run_id:
        required``) for an empty id, ``RunNotFound`` for an unknown one."""
        require_run_id(run_id)
        resp = self._call(
            "workflow-store",
            self._store.GetRuns,
            store_pb.GetRunsRequest(runs=[store_pb.GetRunRequest(run_id=run_id)]),
        )
        for run in resp.runs:  # a run the store does not have is left out
            return Run.from_proto(run)
        raise RunNotFound(run_id).hinted(self._surface)

    def cancel_run(
        self,
        run_id: str,
        *,
        grace: timedelta = timedelta(seconds=30),
        reason: str = "",
    ) -> Run:
        """Cancel ``run_id`` and return it as the store now has it. A run no worker
        holds is CANCELLED at once (its queued message is dropped). A running one is
        marked cancel-requested (``Run.cancelling``): its job sees ``ctx.cancelled``
        within the worker's cancel check interval, and its body is stopped once
        ``grace`` has passed; the run then ends CANCELLED with ``reason``, whatever the
        body returned, and is never retried or resumed. ``grace`` zero cancels a
        running run at once, leaving its body to be stopped at its next heartbeat. A
        run already finished is returned unchanged. Raises ``InvalidArgument`` for a
        grace outside 0 .. 1 h, ``RunNotFound`` for an unknown run."""
        cancel = CancelRequest(run_id, reason, grace)
        request = store_pb.CancelRunRequest(run_id=cancel.run_id, reason=cancel.reason)
        request.grace.FromTimedelta(cancel.grace)
        resp = self._call("workflow-store", self._store.CancelRun, request)
        return Run.from_proto(resp.run)

    def list_runs(
        self,
        schedule_id: str | None = None,
        *,
        limit: int = 50,
        states: Iterable[str] = (),
        schedule_ids: Iterable[str] = (),
    ) -> list[Run]:
        """Runs, newest first: of one schedule, of any of ``schedule_ids`` (at most
        1,000) or of all, optionally only in ``states`` (names such as ``"FAILED"``)."""
        if limit < 1:
            raise InvalidArgument("limit", f"must be at least 1, got {limit}")
        request = store_pb.ListRunsRequest(
            schedule_id=schedule_id or "",
            limit=limit,
            states=_enums.parse_states(states),
            schedule_ids=list(schedule_ids),
        )
        resp = self._call("workflow-store", self._store.ListRuns, request)
        return [Run.from_proto(r) for r in resp.runs]

    def run_events(self, run_id: str) -> list[RunEvent]:
        """The run's history, oldest first. Raises ``InvalidArgument`` (``run_id:
        required``) for an empty id."""
        require_run_id(run_id)
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
                raise WaitTimeout(run, timeout).hinted(self._surface)
            time.sleep(min(interval, remaining))
