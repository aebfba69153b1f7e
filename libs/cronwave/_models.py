"""What the SDK returns: frozen dataclasses with aware UTC datetimes, timedeltas and
enum names as strings, built from the protos (and never sent back as they are)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from google.protobuf.timestamp_pb2 import Timestamp

from cronwave import _enums
from cronwave_core.domain.deadlines import Notifier, NotifyFormat
from cronwave_core.domain.labels import is_critical
from cronwave_core.domain.progress import Progress
from cronwave_core.domain.spec import Catchup, DstGap, DstRepeat, Interval, Overlap, Policy, Spec

_DEFAULT_POLICY = Policy()


def _dt(ts: Timestamp) -> datetime:
    return datetime.fromtimestamp(ts.seconds, UTC) + timedelta(microseconds=ts.nanos // 1000)


def _opt_dt(msg: Any, name: str) -> datetime | None:
    return _dt(getattr(msg, name)) if msg.HasField(name) else None


def _json(text: str) -> Any:
    return json.loads(text) if text else None


@dataclass(frozen=True)
class Schedule:
    """A schedule as the workflow-store holds it. Policies are ``cronwave_core.domain.spec``'s
    enums, which are strings too (``Overlap.BUFFER_ONE == "buffer_one"``); ``spec`` and
    ``policy`` give the whole values, as ``Client.create_schedule`` takes them."""

    schedule_id: str
    job_type: str
    cron: tuple[str, ...]
    time_zone: str
    payload_json: str
    paused: bool
    pause_note: str
    dst_gap: DstGap
    dst_repeat: DstRepeat
    overlap: Overlap
    catchup: Catchup
    catchup_window: timedelta | None
    exclude_dates: tuple[date, ...]
    intervals: tuple[Interval, ...]
    one_off: tuple[datetime, ...]
    start_at: datetime | None
    end_at: datetime | None
    max_runs: int
    jitter: timedelta
    created_at: datetime | None
    updated_at: datetime | None
    revision: int
    deleted: bool
    #: Why the store left part of this schedule out, when it did: a listing leaves out
    #: a payload over the size limit (written before the limit existed), any reply all
    #: but the identity of a schedule too large to send. Such a schedule is not
    #: planned; delete it and create it again within the limits. Empty when whole.
    withheld: str = ""
    #: At most this many catch-up runs with ``catchup="all"`` (0: the default, 100).
    catchup_max_runs: int = 0
    #: ``"apply:<manager>"`` when ``cronwave apply`` manages it (its ``--prune`` may
    #: delete it); empty for a schedule made by hand.
    managed_by: str = ""
    #: Each slot must have SUCCEEDED within this long of its fire time (None: no
    #: deadline); a breach goes to ``notifiers``.
    deadline: timedelta | None = None
    notifiers: tuple[Notifier, ...] = ()
    #: Its owners' ``key=value`` labels (``{"critical": "true", "team": "billing"}``);
    #: ``critical=true`` marks a schedule whose slots must succeed (see ``critical``).
    labels: dict[str, str] = field(default_factory=dict)
    #: The share of its runs traced whole, 0..1 (1: every run; so are a critical
    #: schedule's whatever this says).
    trace_sample: float = 1.0

    @property
    def critical(self) -> bool:
        """Labelled ``critical=true``: an alert pages when its slots do not succeed (and
        every run is traced)."""
        return is_critical(self.labels)

    @property
    def payload(self) -> Any:
        """The job input, decoded from JSON (``{}`` when there is none)."""
        return json.loads(self.payload_json) if self.payload_json else {}

    @property
    def spec(self) -> Spec:
        """When it fires, as one value."""
        return Spec(
            cron=self.cron,
            time_zone=self.time_zone,
            dst_gap=self.dst_gap,
            dst_repeat=self.dst_repeat,
            exclude_dates=self.exclude_dates,
            start_at=self.start_at,
            end_at=self.end_at,
            max_runs=self.max_runs,
            intervals=self.intervals,
            one_off=self.one_off,
            jitter=self.jitter,
        )

    @property
    def policy(self) -> Policy:
        """What it does about overlaps and downtime, as one value."""
        window = self.catchup_window
        return Policy(
            overlap=self.overlap,
            catchup=self.catchup,
            catchup_window=_DEFAULT_POLICY.catchup_window if window is None else window,
            catchup_max_runs=self.catchup_max_runs or _DEFAULT_POLICY.catchup_max_runs,
            deadline=self.deadline,
            notifiers=self.notifiers,
            trace_sample=self.trace_sample,
        )

    @classmethod
    def from_proto(cls, msg: pb.Schedule) -> Schedule:
        spec, policy = msg.spec, msg.policy
        return cls(
            schedule_id=msg.schedule_id,
            job_type=msg.job_type,
            cron=tuple(spec.cron),
            time_zone=spec.time_zone or "UTC",
            payload_json=msg.payload_json,
            paused=msg.paused,
            pause_note=msg.pause_note,
            dst_gap=DstGap.from_proto(spec.dst_gap),
            dst_repeat=DstRepeat.from_proto(spec.dst_repeat),
            overlap=Overlap.from_proto(policy.overlap),
            catchup=Catchup.from_proto(policy.catchup),
            catchup_window=(
                policy.catchup_window.ToTimedelta() if policy.HasField("catchup_window") else None
            ),
            # The store validated these dates; a malformed one would be a store bug.
            exclude_dates=tuple(date.fromisoformat(d) for d in spec.exclude_dates),
            intervals=tuple(
                Interval(iv.every.ToTimedelta(), iv.phase.ToTimedelta()) for iv in spec.intervals
            ),
            one_off=tuple(_dt(t) for t in spec.one_off),
            start_at=_opt_dt(spec, "start_at"),
            end_at=_opt_dt(spec, "end_at"),
            max_runs=spec.max_runs,
            jitter=spec.jitter.ToTimedelta(),
            created_at=_opt_dt(msg, "created_at"),
            updated_at=_opt_dt(msg, "updated_at"),
            revision=msg.revision,
            deleted=msg.deleted,
            withheld=msg.withheld,
            catchup_max_runs=policy.catchup_max_runs,
            managed_by=msg.managed_by,
            deadline=policy.deadline.ToTimedelta() if policy.HasField("deadline") else None,
            notifiers=tuple(
                Notifier(n.url, NotifyFormat.from_proto(n.format)) for n in policy.notifiers
            ),
            labels=dict(sorted(msg.labels.items())),
            trace_sample=policy.trace_sample if policy.HasField("trace_sample") else 1.0,
        )


@dataclass(frozen=True)
class Run:
    """One run of a schedule. ``state`` is a name such as ``"SUCCEEDED"``;
    ``trigger`` one such as ``"MANUAL"``."""

    run_id: str
    schedule_id: str
    fire_time: datetime
    state: str
    trigger: str
    job_type: str
    payload_json: str
    attempt: int
    fencing_token: int
    idempotency_key: str
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    error: str
    result_json: str
    checkpoint_json: str
    queue: str
    worker_id: str
    trace_id: str
    #: When the current attempt claimed the run (before the fire time, by the
    #: dispatch lead); ``started_at`` is when the job body first began.
    claimed_at: datetime | None = None
    #: Set while a cancel waits for the running body to stop: when it is stopped.
    cancel_deadline: datetime | None = None
    cancel_reason: str = ""
    #: How far the job body said it got (``JobContext.progress``); None until it said.
    progress: Progress | None = None

    @property
    def terminal(self) -> bool:
        """True once the state can no longer change."""
        return self.state in _enums.TERMINAL_STATES

    @property
    def for_slot(self) -> bool:
        """True for a run of one of the calendar's slots (SCHEDULED, CATCHUP, BACKFILL);
        False for a MANUAL trigger, which proves nothing of any slot."""
        return self.trigger in _enums.SLOT_TRIGGER_NAMES

    @property
    def cancelling(self) -> bool:
        """True while a cancel waits for the running body to stop."""
        return not self.terminal and self.cancel_deadline is not None

    @property
    def lateness(self) -> timedelta | None:
        """Fire lateness: when the job body first began minus the nominal fire time
        (None until it has)."""
        return self.started_at - self.fire_time if self.started_at else None

    @property
    def duration(self) -> timedelta | None:
        """From when the job body first began to the terminal state."""
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json) if self.payload_json else {}

    @property
    def result(self) -> Any:
        """The job's result, decoded from JSON; ``None`` when it has none."""
        return _json(self.result_json)

    @classmethod
    def from_proto(cls, msg: pb.Run) -> Run:
        return cls(
            run_id=msg.run_id,
            schedule_id=msg.schedule_id,
            fire_time=_dt(msg.fire_time),
            state=_enums.state_name(msg.state),
            trigger=_enums.trigger_name(msg.trigger),
            job_type=msg.job_type,
            payload_json=msg.payload_json,
            attempt=msg.attempt,
            fencing_token=msg.fencing_token,
            idempotency_key=msg.idempotency_key,
            created_at=_opt_dt(msg, "created_at"),
            started_at=_opt_dt(msg, "started_at"),
            finished_at=_opt_dt(msg, "finished_at"),
            heartbeat_at=_opt_dt(msg, "heartbeat_at"),
            error=msg.error,
            result_json=msg.result_json,
            checkpoint_json=msg.checkpoint_json,
            queue=msg.queue,
            worker_id=msg.worker_id,
            trace_id=msg.trace_id,
            claimed_at=_opt_dt(msg, "claimed_at"),
            cancel_deadline=_opt_dt(msg, "cancel_deadline"),
            cancel_reason=msg.cancel_reason,
            progress=Progress.from_proto(msg.progress) if msg.HasField("progress") else None,
        )


@dataclass(frozen=True)
class RunEvent:
    """One entry of a run's append-only history (``kind``: recorded, enqueued,
    claimed, heartbeat, succeeded, failed, ...)."""

    seq: int
    run_id: str
    kind: str
    at: datetime
    detail: str
    attempt: int

    @classmethod
    def from_proto(cls, msg: pb.RunEvent) -> RunEvent:
        return cls(
            seq=msg.seq,
            run_id=msg.run_id,
            kind=msg.kind,
            at=_dt(msg.at),
            detail=msg.detail,
            attempt=msg.attempt,
        )


@dataclass(frozen=True)
class AuditEvent:
    """One entry of the audit trail: who (``actor``: ``user:alice``,
    ``service:dispatcher``, ``insecure``, ``unauthenticated``) called which mutating
    ``rpc``, when, from where (``peer``), and what it changed (``changes``: field ->
    ``{"old": ..., "new": ...}``, or sizes in bytes for payloads and large values)."""

    id: int
    at: datetime
    actor: str
    peer: str
    rpc: str
    schedule_id: str
    run_id: str
    changes: dict[str, Any]

    @classmethod
    def from_proto(cls, msg: store_pb.AuditEvent) -> AuditEvent:
        return cls(
            id=msg.id,
            at=_dt(msg.at),
            actor=msg.actor,
            peer=msg.peer,
            rpc=msg.rpc,
            schedule_id=msg.schedule_id,
            run_id=msg.run_id,
            changes=json.loads(msg.changes_json) if msg.changes_json else {},
        )


@dataclass(frozen=True)
class Lease:
    """Who leads a scope. ``expires_at`` is the leader-election's wall clock, for
    display only: nothing should compare it with a local clock to decide anything.
    The holder's fencing token is not shown (it is the holder's alone); the leading
    planner reports it (``Client.planner_status``)."""

    scope: str
    holder: str
    ttl: timedelta
    expires_at: datetime | None

    @property
    def held(self) -> bool:
        return bool(self.holder)

    @classmethod
    def from_proto(cls, msg: leader_pb.Lease) -> Lease:
        return cls(
            scope=msg.scope,
            holder=msg.holder,
            ttl=msg.ttl.ToTimedelta(),
            expires_at=_opt_dt(msg, "expires_at"),
        )


@dataclass(frozen=True)
class PlannerStatus:
    """What one cron-planner replica reports about itself."""

    candidate: str
    leader: bool
    fencing_token: int
    schedules: int
    next_fire_time: datetime | None
    next_schedule_id: str
    fired: int
    revision: int

    @classmethod
    def from_proto(cls, msg: planner_pb.GetPlannerStatusResponse) -> PlannerStatus:
        return cls(
            candidate=msg.candidate,
            leader=msg.leader,
            fencing_token=msg.fencing_token,
            schedules=msg.schedules,
            next_fire_time=_opt_dt(msg, "next_fire_time"),
            next_schedule_id=msg.next_schedule_id,
            fired=msg.fired,
            revision=msg.revision,
        )


@dataclass(frozen=True)
class DeadlineDelivery:
    """One notification of a breach to one webhook: ``status`` is ``pending``,
    ``delivered`` or ``failed``; ``http_status`` the last answer's (0: none)."""

    url: str
    format: str
    status: str
    attempts: int
    http_status: int
    error: str
    updated_at: datetime | None


@dataclass(frozen=True)
class DeadlineBreach:
    """A slot that had not SUCCEEDED by its schedule's deadline. ``reason``: failed,
    timed_out, cancelled, dead_lettered, still_running, not_started, missed or
    succeeded_late; ``cause`` says more; ``run_id`` is empty when no run was
    recorded for the slot."""

    breach_id: int
    schedule_id: str
    fire_time: datetime
    deadline_at: datetime
    reason: str
    cause: str
    run_id: str
    run_state: str
    detected_at: datetime
    deliveries: tuple[DeadlineDelivery, ...]

    @classmethod
    def from_proto(cls, msg: store_pb.DeadlineBreach) -> DeadlineBreach:
        return cls(
            breach_id=msg.id,
            schedule_id=msg.schedule_id,
            fire_time=_dt(msg.fire_time),
            deadline_at=_dt(msg.deadline_at),
            reason=msg.reason,
            cause=msg.cause,
            run_id=msg.run_id,
            run_state=_enums.state_name(msg.run_state) if msg.run_state else "",
            detected_at=_dt(msg.detected_at),
            deliveries=tuple(
                DeadlineDelivery(
                    url=d.url,
                    format=NotifyFormat.from_proto(d.format).value,
                    status=d.status,
                    attempts=d.attempts,
                    http_status=d.http_status,
                    error=d.error,
                    updated_at=_opt_dt(d, "updated_at"),
                )
                for d in msg.deliveries
            ),
        )
