"""Protobuf messages <-> the store's domain values.

Request conversions validate as they go: a bad field raises ``InvalidArgument``
naming it, before anything touches the database.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format

from cronwave.v1 import common_pb2 as pb
from cronwave.v1 import workflow_store_service_pb2 as api
from cronwave_core import calendar
from cronwave_core.convert import (
    dt_to_ts,
    policy_from_proto,
    policy_to_proto,
    spec_from_proto,
    spec_to_proto,
    td_to_duration,
    ts_to_dt,
)
from cronwave_core.errors import InvalidArgument
from cronwave_core.spec import Policy, Spec
from workflow_store import validate
from workflow_store.records import (
    COMPLETIONS,
    DEFAULT_FENCING_SCOPE,
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_QUEUE,
    FENCED_TRIGGERS,
    DeadLetterReason,
    DeadLetterRecord,
    DeadLetterRequest,
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

RUN_STATES: dict[pb.RunState, RunState] = {
    pb.RUN_STATE_PENDING: RunState.PENDING,
    pb.RUN_STATE_RUNNING: RunState.RUNNING,
    pb.RUN_STATE_SUCCEEDED: RunState.SUCCEEDED,
    pb.RUN_STATE_FAILED: RunState.FAILED,
    pb.RUN_STATE_TIMED_OUT: RunState.TIMED_OUT,
    pb.RUN_STATE_MISSED: RunState.MISSED,
    pb.RUN_STATE_CANCELLED: RunState.CANCELLED,
    pb.RUN_STATE_DEAD_LETTERED: RunState.DEAD_LETTERED,
}
_RUN_STATE_PB = {v: k for k, v in RUN_STATES.items()}
TRIGGERS: dict[pb.TriggerKind, Trigger] = {
    pb.TRIGGER_KIND_SCHEDULED: Trigger.SCHEDULED,
    pb.TRIGGER_KIND_MANUAL: Trigger.MANUAL,
    pb.TRIGGER_KIND_BACKFILL: Trigger.BACKFILL,
    pb.TRIGGER_KIND_CATCHUP: Trigger.CATCHUP,
}
_TRIGGER_PB = {v: k for k, v in TRIGGERS.items()}


# -- stored JSON of specs and policies (the proto's canonical JSON) -------------------


def spec_to_dict(spec: Spec) -> dict[str, Any]:
    return json_format.MessageToDict(spec_to_proto(spec), preserving_proto_field_name=True)


def spec_from_dict(data: dict[str, Any]) -> Spec:
    return spec_from_proto(json_format.ParseDict(data, pb.ScheduleSpec()))


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    return json_format.MessageToDict(policy_to_proto(policy), preserving_proto_field_name=True)


def policy_from_dict(data: dict[str, Any]) -> Policy:
    return policy_from_proto(json_format.ParseDict(data, pb.SchedulePolicy()))


# -- schedules -------------------------------------------------------------------------


def new_schedule_from_proto(msg: pb.Schedule) -> NewSchedule:
    """A CreateSchedule request's schedule, validated; server-owned fields ignored."""
    schedule_id = validate.schedule_id(msg.schedule_id)
    spec = spec_from_proto(msg.spec)
    calendar.validate(spec)
    policy = policy_from_proto(msg.policy)
    payload = validate.payload_json(msg.payload_json)
    return NewSchedule(schedule_id, spec, policy, msg.job_type, payload, msg.paused, msg.pause_note)


def schedule_to_proto(rec: ScheduleRecord) -> pb.Schedule:
    return pb.Schedule(
        schedule_id=rec.schedule_id,
        spec=spec_to_proto(rec.spec),
        policy=policy_to_proto(rec.policy),
        job_type=rec.job_type,
        payload_json=rec.payload_json,
        paused=rec.paused,
        pause_note=rec.pause_note,
        created_at=dt_to_ts(rec.created_at),
        updated_at=dt_to_ts(rec.updated_at),
        revision=rec.revision,
        deleted=rec.deleted,
    )


# -- job types -------------------------------------------------------------------------


def job_type_from_proto(msg: pb.JobType) -> JobTypeRecord:
    """A RegisterJobType request's job type, validated, with defaults filled in."""
    retry = RetrySettings(
        initial_interval=msg.retry.initial_interval.ToTimedelta(),
        backoff_coefficient=msg.retry.backoff_coefficient,
        maximum_interval=msg.retry.maximum_interval.ToTimedelta(),
        maximum_attempts=msg.retry.maximum_attempts,
        non_retryable_errors=tuple(msg.retry.non_retryable_errors),
    )
    heartbeat = msg.heartbeat_timeout.ToTimedelta()
    return validate.job_type(
        JobTypeRecord(
            name=msg.name,
            duration_limit=msg.duration_limit.ToTimedelta(),
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
    return ts_to_dt(msg.fire_time)


def _fencing(token: int, scope: str, required: bool, why: str) -> tuple[int, str]:
    if token < 0:
        raise InvalidArgument("fencing_token", "must not be negative")
    if required and token == 0:
        raise InvalidArgument(
            "fencing_token",
            f"required for {why}: pass the planner's lease token so a deposed leader's "
            "fires are refused",
        )
    return token, scope or DEFAULT_FENCING_SCOPE


def record_run_from_proto(msg: api.RecordRunRequest) -> RecordRequest:
    if not msg.schedule_id:
        raise InvalidArgument("schedule_id", "required")
    fire_time = _fire_time(msg)
    if msg.trigger == pb.TRIGGER_KIND_UNSPECIFIED:
        trigger = Trigger.SCHEDULED
    elif msg.trigger in TRIGGERS:
        trigger = TRIGGERS[msg.trigger]
    else:
        raise InvalidArgument("trigger", f"unknown value {msg.trigger}")
    token, scope = _fencing(
        msg.fencing_token,
        msg.fencing_scope,
        trigger in FENCED_TRIGGERS,
        f"a {trigger.value} run",
    )
    return RecordRequest(
        schedule_id=msg.schedule_id,
        fire_time=fire_time,
        trigger=trigger,
        fencing_token=token,
        fencing_scope=scope,
        idempotency_key=msg.idempotency_key,
        queue=msg.queue,
        trace_id=msg.trace_id,
    )


def record_missed_from_proto(msg: api.RecordMissedRequest) -> RecordRequest:
    if not msg.schedule_id:
        raise InvalidArgument("schedule_id", "required")
    fire_time = _fire_time(msg)
    token, scope = _fencing(msg.fencing_token, msg.fencing_scope, True, "a missed fire")
    return RecordRequest(
        schedule_id=msg.schedule_id,
        fire_time=fire_time,
        trigger=trigger_from_proto(msg.trigger),
        fencing_token=token,
        fencing_scope=scope,
        missed=True,
        reason=msg.reason,
    )


def required_time(msg: Any, name: str, field: str) -> datetime:
    """The instant in ``msg.<name>``; ``InvalidArgument(field)`` when unset."""
    if not msg.HasField(name):
        raise InvalidArgument(field, "required")
    return ts_to_dt(getattr(msg, name))


def fencing(token: int, scope: str) -> tuple[int, str]:
    """A planner's fencing token (required) and scope (default "planner")."""
    return _fencing(token, scope, True, "a planner's write")


def trigger_from_proto(value: int, field: str = "trigger") -> Trigger:
    """A trigger kind; UNSPECIFIED means SCHEDULED."""
    if value == pb.TRIGGER_KIND_UNSPECIFIED:
        return Trigger.SCHEDULED
    if value not in TRIGGERS:
        raise InvalidArgument(field, f"unknown value {value}")
    return TRIGGERS[value]  # type: ignore[index]


def trigger_to_proto(trigger: Trigger) -> pb.TriggerKind:
    return _TRIGGER_PB[trigger]


def run_states_from_proto(values: Any) -> tuple[RunState, ...]:
    states = []
    for i, value in enumerate(values):
        if value not in RUN_STATES:
            raise InvalidArgument(f"states[{i}]", f"unknown run state {value}")
        states.append(RUN_STATES[value])
    return tuple(states)


def completion_state_from_proto(value: pb.RunState) -> RunState:
    state = RUN_STATES.get(value)
    if state not in COMPLETIONS:
        raise InvalidArgument(
            "state",
            "must be one of RUN_STATE_SUCCEEDED, RUN_STATE_FAILED, RUN_STATE_TIMED_OUT or "
            f"RUN_STATE_CANCELLED, got {pb.RunState.Name(value) if state else value}",
        )
    assert state is not None
    return state


def _opt(ts: datetime | None) -> Any:
    return dt_to_ts(ts) if ts is not None else None


def run_to_proto(rec: RunRecord) -> pb.Run:
    return pb.Run(
        run_id=rec.run_id,
        schedule_id=rec.schedule_id,
        fire_time=dt_to_ts(rec.fire_time),
        state=_RUN_STATE_PB[rec.state],
        trigger=_TRIGGER_PB[rec.trigger],
        job_type=rec.job_type,
        payload_json=rec.payload_json,
        attempt=rec.attempt,
        fencing_token=rec.fencing_token,
        idempotency_key=rec.idempotency_key,
        created_at=dt_to_ts(rec.created_at),
        started_at=_opt(rec.started_at),
        finished_at=_opt(rec.finished_at),
        error=rec.error,
        result_json=rec.result_json,
        checkpoint_json=rec.checkpoint_json,
        queue=rec.queue,
        worker_id=rec.worker_id,
        trace_id=rec.trace_id,
        heartbeat_at=_opt(rec.heartbeat_at),
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
    return api.StalledRun(run=run_to_proto(rec.run), reason=rec.reason.value)


def dead_letter_from_proto(msg: api.DeadLetterRunRequest) -> DeadLetterRequest:
    if not msg.run_id and not msg.message_json:
        raise InvalidArgument("run_id", "required unless message_json carries a poison message")
    if msg.attempt_token < 0:
        raise InvalidArgument("attempt_token", "must not be negative")
    try:
        reason = DeadLetterReason(msg.reason)
    except ValueError:
        known = ", ".join(r.value for r in DeadLetterReason)
        raise InvalidArgument("reason", f"{msg.reason!r} is not one of {known}") from None
    return DeadLetterRequest(
        run_id=msg.run_id,
        attempt_token=msg.attempt_token,
        reason=reason,
        error=msg.error,
        queue=msg.queue,
        message_json=msg.message_json,
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
