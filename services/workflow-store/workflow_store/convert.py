"""Protobuf messages <-> the store's domain values.

Request conversions validate as they go: a bad field raises ``InvalidArgument``
naming it, before anything touches the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts, duration_to_td, opt_ts, td_to_duration, ts_to_dt
from cronwave_core.domain import calendar
from cronwave_core.domain.catchup import check_coherent
from cronwave_core.domain.labels import labels_value
from cronwave_core.domain.progress import Progress
from cronwave_core.domain.runs import RUN_STATES
from cronwave_core.domain.spec import (
    Policy,
    Spec,
)
from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import lease_name, shown
from workflow_store import validate
from workflow_store.records import (
    COMPLETIONS,
    DEFAULT_FENCING_SCOPE,
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_QUEUE,
    FENCED_TRIGGERS,
    BeatRequest,
    ClaimRequest,
    CompletionRequest,
    DeadLetterReason,
    DeadLetterRecord,
    DeadLetterRequest,
    EventRequest,
    JobTypeRecord,
    NewSchedule,
    RecordRequest,
    RetrySettings,
    RunEventRecord,
    RunRecord,
    RunState,
    ScheduleRecord,
    StalledRun,
    Trigger,
)


def new_schedule_from_proto(msg: pb.Schedule) -> NewSchedule:
    """A CreateSchedule request's schedule, validated by the request limits in force
    (``validate.limits()``); server-owned fields ignored."""
    schedule_id = validate.schedule_id(msg.schedule_id)
    spec = Spec.from_proto(msg.spec)
    calendar.validate(spec)
    policy = Policy.from_proto(msg.policy)
    check_coherent(policy)
    job_type = validate.name(msg.job_type, "job_type")
    payload = validate.payload_json(msg.payload_json)
    note = validate.note(msg.pause_note, "pause_note")
    managed_by = validate.key(msg.managed_by, "managed_by")
    labels = labels_value(msg.labels)
    return NewSchedule(
        schedule_id, spec, policy, job_type, payload, msg.paused, note, managed_by, labels
    )


@lru_cache(maxsize=256)
def _policy_proto(policy: Policy) -> pb.SchedulePolicy:
    """Policies are few: each is converted once. The message is only ever copied into
    a Schedule (never handed out), so sharing it is safe."""
    return policy.to_proto()


def schedule_to_proto(rec: ScheduleRecord) -> pb.Schedule:
    if rec.identity_only:
        return pb.Schedule(
            schedule_id=rec.schedule_id,
            job_type=rec.job_type,
            paused=rec.paused,
            created_at=dt_to_ts(rec.created_at),
            updated_at=dt_to_ts(rec.updated_at),
            revision=rec.revision,
            deleted=rec.deleted,
            withheld=rec.withheld,
            managed_by=rec.managed_by,
            labels=dict(rec.labels),
        )
    return pb.Schedule(
        schedule_id=rec.schedule_id,
        spec=rec.spec.to_proto(),
        policy=_policy_proto(rec.policy),
        job_type=rec.job_type,
        payload_json=rec.payload_json,
        paused=rec.paused,
        pause_note=rec.pause_note,
        created_at=dt_to_ts(rec.created_at),
        updated_at=dt_to_ts(rec.updated_at),
        revision=rec.revision,
        deleted=rec.deleted,
        withheld=rec.withheld,
        managed_by=rec.managed_by,
        labels=dict(rec.labels),
    )


def schedule_reply(rec: ScheduleRecord, most: int) -> pb.Schedule:
    """``rec`` as any reply sends it: whole when its encoding is at most ``most``
    bytes, else by its identity alone, saying why in ``withheld`` -- a message gRPC
    refuses to deliver would fail the call (a listing: at this schedule, every time)."""
    msg = schedule_to_proto(rec)
    size = msg.ByteSize()
    if size <= most:
        return msg
    why = f"schedule: {size} bytes encoded, over the limit of {most} for one reply"
    return schedule_to_proto(replace(rec, withheld=why, identity_only=True))


# -- job types -------------------------------------------------------------------------


def job_type_from_proto(msg: pb.JobType) -> JobTypeRecord:
    """A RegisterJobType request's job type, validated, with defaults filled in."""
    retry = RetrySettings(
        initial_interval=duration_to_td(
            msg.retry.initial_interval, "job_type.retry.initial_interval"
        ),
        backoff_coefficient=msg.retry.backoff_coefficient,
        maximum_interval=duration_to_td(
            msg.retry.maximum_interval, "job_type.retry.maximum_interval"
        ),
        maximum_attempts=msg.retry.maximum_attempts,
        non_retryable_errors=tuple(msg.retry.non_retryable_errors),
    )
    heartbeat = duration_to_td(msg.heartbeat_timeout, "job_type.heartbeat_timeout")
    return validate.job_type(
        JobTypeRecord(
            name=msg.name,
            duration_limit=duration_to_td(msg.duration_limit, "job_type.duration_limit"),
            heartbeat_timeout=heartbeat if heartbeat != timedelta(0) else DEFAULT_HEARTBEAT_TIMEOUT,
            retry=retry,
            queue=msg.queue or DEFAULT_QUEUE,
            priority=msg.priority,
            financial=msg.financial,
        )
    )


def job_type_to_proto(rec: JobTypeRecord) -> pb.JobType:
    return pb.JobType(
        name=rec.name,
        duration_limit=td_to_duration(rec.duration_limit),
        heartbeat_timeout=td_to_duration(rec.heartbeat_timeout),
        retry=pb.RetryPolicy(
            initial_interval=td_to_duration(rec.retry.initial_interval),
            backoff_coefficient=rec.retry.backoff_coefficient,
            maximum_interval=td_to_duration(rec.retry.maximum_interval),
            maximum_attempts=rec.retry.maximum_attempts,
            non_retryable_errors=list(rec.retry.non_retryable_errors),
        ),
        queue=rec.queue,
        priority=rec.priority,
        financial=rec.financial,
    )


# -- runs ------------------------------------------------------------------------------


def _fire_time(msg: Any) -> datetime:
    if not msg.HasField("fire_time"):
        raise InvalidArgument("fire_time", "required: the run's nominal fire time")
    return ts_to_dt(msg.fire_time, "fire_time")


def fencing_scope(scope: str, field: str = "fencing_scope") -> str:
    """A lease scope's name (default "planner"), as leader-election grants them."""
    return lease_name(scope or DEFAULT_FENCING_SCOPE, field)


def _fencing(token: int, scope: str, required: bool, why: str) -> tuple[int, str]:
    if token < 0:
        raise InvalidArgument("fencing_token", "must not be negative")
    if required and token == 0:
        raise InvalidArgument(
            "fencing_token",
            f"required for {why}: pass the planner's lease token so a deposed leader's "
            "fires are refused",
        )
    return token, fencing_scope(scope)


def record_run_from_proto(msg: api.RecordRunRequest) -> RecordRequest:
    validate.schedule_id(msg.schedule_id)
    fire_time = _fire_time(msg)
    trigger = Trigger.from_proto(msg.trigger)
    token, scope = _fencing(
        msg.fencing_token,
        msg.fencing_scope,
        trigger in FENCED_TRIGGERS,
        f"a {trigger.value} run",
    )
    validate.key(msg.traceparent, "traceparent")
    payload = ""
    if msg.payload_json:
        if trigger is not Trigger.MANUAL:
            raise InvalidArgument(
                "payload_json",
                f"a {trigger.value} run has its schedule's payload; only a manual run "
                "(TriggerRun) carries its own",
            )
        payload = validate.payload_json(msg.payload_json, within="")
    return RecordRequest(
        schedule_id=msg.schedule_id,
        fire_time=fire_time,
        trigger=trigger,
        fencing_token=token,
        fencing_scope=scope,
        idempotency_key=validate.key(msg.idempotency_key, "idempotency_key"),
        queue=validate.name(msg.queue, "queue"),
        trace_id=validate.key(msg.trace_id, "trace_id"),
        enqueue=msg.enqueue,
        payload_json=payload,
    )


def required_time(msg: Any, name: str, field: str) -> datetime:
    """The instant in ``msg.<name>``; ``InvalidArgument(field)`` when unset."""
    if not msg.HasField(name):
        raise InvalidArgument(field, "required")
    return ts_to_dt(getattr(msg, name), field)


def keys(values: Sequence[str], field: str) -> list[str]:
    """A repeated field of ids, each a well-formed key (``field[3]`` names the one
    that is not)."""
    return [validate.key(value, f"{field}[{i}]") for i, value in enumerate(values)]


def schedule_ids(values: Sequence[str], field: str) -> list[str]:
    """A repeated field of schedule ids, each empty or a schedule id (``field[3]``
    names the one that is not)."""
    return [validate.schedule_ref(value, f"{field}[{i}]") for i, value in enumerate(values)]


def fencing(token: int, scope: str) -> tuple[int, str]:
    """A planner's fencing token (required) and scope (default "planner")."""
    return _fencing(token, scope, True, "a planner's write")


def run_states_from_proto(values: Any) -> tuple[RunState, ...]:
    states = []
    for i, value in enumerate(values):
        state = RUN_STATES.lookup(value)
        if state is None:
            raise InvalidArgument(f"states[{i}]", f"unknown run state {value}")
        states.append(state)
    return tuple(states)


def completion_state_from_proto(value: int) -> RunState:
    state = RUN_STATES.lookup(value)
    if state is None or state not in COMPLETIONS:
        raise InvalidArgument(
            "state",
            "must be one of RUN_STATE_SUCCEEDED, RUN_STATE_FAILED, RUN_STATE_TIMED_OUT or "
            f"RUN_STATE_CANCELLED, got {RUN_STATES.names[state] if state else value}",
        )
    return state


_HEX = frozenset("0123456789abcdef")


def attempt_token(value: str, field: str = "attempt_token", required: bool = True) -> str:
    """An attempt token as ClaimRuns returned it: 32 lowercase hex digits."""
    if not value and not required:
        return value
    if len(value) != 32 or not _HEX.issuperset(value):
        raise InvalidArgument(
            field,
            "must be the 32 hex digits the run's claim returned (ClaimRunResponse.attempt_token)",
        )
    return value


def completion_from_proto(msg: api.CompleteRunRequest) -> CompletionRequest:
    """A CompleteRuns item; the store checks the rest of its rules."""
    validate.key(msg.traceparent, "traceparent")
    return CompletionRequest(
        run_id=validate.run_id(msg.run_id),
        attempt_token=attempt_token(msg.attempt_token),
        state=completion_state_from_proto(msg.state),
        error=validate.text(msg.error, "error"),
        result_json=validate.result_json(msg.result_json),
        retry_after=duration_to_td(msg.retry_after, "retry_after"),
        body_started_at=opt_ts(msg, "body_started_at"),
    )


def beat_from_proto(msg: api.HeartbeatRequest) -> BeatRequest:
    """A Heartbeats item; the store checks the attempt under the run's row lock."""
    return BeatRequest(
        run_id=validate.run_id(msg.run_id),
        attempt_token=attempt_token(msg.attempt_token),
        checkpoint_json=validate.checkpoint_json(msg.checkpoint_json),
        body_started_at=opt_ts(msg, "body_started_at"),
        progress=_progress(msg),
    )


def _progress(msg: api.HeartbeatRequest) -> Progress | None:
    """A beat's progress, its fields named ``progress.<field>`` when malformed."""
    if not msg.HasField("progress"):
        return None
    try:
        return Progress.from_proto(msg.progress)
    except InvalidArgument as exc:
        raise InvalidArgument(f"progress.{exc.field}", exc.rule) from None


def event_from_proto(msg: api.AppendRunEventRequest) -> EventRequest:
    """An AppendRunEvents item; the store checks that the kind is given."""
    validate.key(msg.traceparent, "traceparent")
    return EventRequest(
        run_id=validate.run_id(msg.run_id),
        kind=validate.name(msg.kind, "kind"),
        detail=validate.text(msg.detail, "detail"),
    )


def claim_from_proto(msg: api.ClaimRunRequest) -> ClaimRequest:
    """A ClaimRuns item; the store checks that both ids are given."""
    validate.key(msg.traceparent, "traceparent")
    return ClaimRequest(
        run_id=validate.run_id(msg.run_id),
        worker_id=validate.name(msg.worker_id, "worker_id"),
        claim_key=validate.claim_key(msg.claim_key, "claim_key"),
    )


def run_id_from_proto(msg: api.GetRunRequest) -> str:
    """A GetRuns item's run id."""
    validate.key(msg.traceparent, "traceparent")
    return validate.run_id(msg.run_id)


def _opt(ts: datetime | None) -> Any:
    return dt_to_ts(ts) if ts is not None else None


def run_to_proto(rec: RunRecord, *, blobs: bool = True) -> pb.Run:
    """``blobs``: False leaves out the run's payload, result and checkpoint, for
    callers that read none of them (the dispatcher, the planner, the worker's
    completion and hand-back, the sweeper): a batch of runs whose blobs are at their
    limits (a MiB or more each) stays one small message, and an answer carries nothing
    its caller would have to receive and throw away."""
    return pb.Run(
        run_id=rec.run_id,
        schedule_id=rec.schedule_id,
        fire_time=dt_to_ts(rec.fire_time),
        state=rec.state.to_proto(),
        trigger=rec.trigger.to_proto(),
        job_type=rec.job_type,
        payload_json=rec.payload_json if blobs else "",
        attempt=rec.attempt,
        fencing_token=rec.fencing_token,
        idempotency_key=rec.idempotency_key,
        created_at=dt_to_ts(rec.created_at),
        started_at=_opt(rec.started_at),
        claimed_at=_opt(rec.claimed_at),
        cancel_deadline=_opt(rec.cancel_deadline),
        cancel_reason=rec.cancel_reason,
        finished_at=_opt(rec.finished_at),
        error=rec.error,
        result_json=rec.result_json if blobs else "",
        checkpoint_json=rec.checkpoint_json if blobs else "",
        queue=rec.queue,
        worker_id=rec.worker_id,
        trace_id=rec.trace_id,
        heartbeat_at=_opt(rec.heartbeat_at),
        progress=rec.progress.to_proto() if rec.progress is not None else None,
    )


def event_to_proto(rec: RunEventRecord) -> pb.RunEvent:
    return pb.RunEvent(
        seq=rec.seq,
        run_id=rec.run_id,
        kind=rec.kind,
        at=dt_to_ts(rec.at),
        detail=rec.detail,
        attempt=rec.attempt,
    )


def iso(dt: datetime) -> str:
    """How instants appear in span attributes and default idempotency keys."""
    return dt.astimezone(UTC).isoformat()


# -- stalled runs and dead letters ------------------------------------------------------


def stalled_to_proto(rec: StalledRun) -> api.StalledRun:
    """Without the payload, result and checkpoint: the dispatcher's sweeper only queues a
    message naming the run (a lost run's checkpoint reaches its next attempt by its
    claim)."""
    return api.StalledRun(run=run_to_proto(rec.run, blobs=False), reason=rec.reason.value)


def dead_letter_from_proto(msg: api.DeadLetterRunRequest) -> DeadLetterRequest:
    if not msg.run_id and not msg.message_json:
        raise InvalidArgument("run_id", "required unless message_json carries a poison message")
    attempt_token(msg.attempt_token, required=False)
    try:
        reason = DeadLetterReason(msg.reason)
    except ValueError:
        known = ", ".join(r.value for r in DeadLetterReason)
        raise InvalidArgument("reason", f"{shown(msg.reason)} is not one of {known}") from None
    return DeadLetterRequest(
        run_id=validate.key(msg.run_id, "run_id"),
        attempt_token=msg.attempt_token,
        reason=reason,
        error=validate.text(msg.error, "error"),
        queue=validate.name(msg.queue, "queue"),
        message_json=validate.text(msg.message_json, "message_json"),
    )


def dead_letter_to_proto(rec: DeadLetterRecord) -> api.DeadLetter:
    return api.DeadLetter(
        id=rec.id,
        run_id=rec.run_id,
        reason=rec.reason,
        error=rec.error,
        queue=rec.queue,
        job_type=rec.job_type,
        attempt=rec.attempt,
        message_json=rec.message_json,
        created_at=dt_to_ts(rec.created_at),
        replayed_at=_opt(rec.replayed_at),
    )
