import datetime

from cronwave_proto.v1 import common_pb2 as _common_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateScheduleRequest(_message.Message):
    __slots__ = ("schedule", "if_absent")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    IF_ABSENT_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    if_absent: bool
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ..., if_absent: _Optional[bool] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule", "created")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    created: bool
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ("schedule", "update_mask")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateScheduleResponse(_message.Message):
    __slots__ = ("schedule", "changed")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    changed: bool
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ...) -> None: ...

class ShardFilter(_message.Message):
    __slots__ = ("count", "shards")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    count: int
    shards: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, count: _Optional[int] = ..., shards: _Optional[_Iterable[int]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("limit", "include_deleted", "after_schedule_id", "shard_filter")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DELETED_FIELD_NUMBER: _ClassVar[int]
    AFTER_SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FILTER_FIELD_NUMBER: _ClassVar[int]
    limit: int
    include_deleted: bool
    after_schedule_id: str
    shard_filter: ShardFilter
    def __init__(self, limit: _Optional[int] = ..., include_deleted: _Optional[bool] = ..., after_schedule_id: _Optional[str] = ..., shard_filter: _Optional[_Union[ShardFilter, _Mapping]] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "revision")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[_common_pb2.Schedule]
    revision: int
    def __init__(self, schedules: _Optional[_Iterable[_Union[_common_pb2.Schedule, _Mapping]]] = ..., revision: _Optional[int] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "note")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    note: str
    def __init__(self, schedule_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "note")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    note: str
    def __init__(self, schedule_id: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "force")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    force: bool
    def __init__(self, schedule_id: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ("schedule", "cancelled")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    cancelled: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ..., cancelled: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ...) -> None: ...

class WatchSchedulesRequest(_message.Message):
    __slots__ = ("since_revision", "shard_filter")
    SINCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    SHARD_FILTER_FIELD_NUMBER: _ClassVar[int]
    since_revision: int
    shard_filter: ShardFilter
    def __init__(self, since_revision: _Optional[int] = ..., shard_filter: _Optional[_Union[ShardFilter, _Mapping]] = ...) -> None: ...

class WatchSchedulesResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ...) -> None: ...

class RegisterJobTypeRequest(_message.Message):
    __slots__ = ("job_type",)
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    job_type: _common_pb2.JobType
    def __init__(self, job_type: _Optional[_Union[_common_pb2.JobType, _Mapping]] = ...) -> None: ...

class RegisterJobTypeResponse(_message.Message):
    __slots__ = ("job_type",)
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    job_type: _common_pb2.JobType
    def __init__(self, job_type: _Optional[_Union[_common_pb2.JobType, _Mapping]] = ...) -> None: ...

class ListJobTypesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobTypesResponse(_message.Message):
    __slots__ = ("job_types",)
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    job_types: _containers.RepeatedCompositeFieldContainer[_common_pb2.JobType]
    def __init__(self, job_types: _Optional[_Iterable[_Union[_common_pb2.JobType, _Mapping]]] = ...) -> None: ...

class RecordRunRequest(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "trigger", "fencing_token", "fencing_scope", "idempotency_key", "queue", "trace_id", "traceparent", "enqueue", "payload_json")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    ENQUEUE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    trigger: _common_pb2.TriggerKind
    fencing_token: int
    fencing_scope: str
    idempotency_key: str
    queue: str
    trace_id: str
    traceparent: str
    enqueue: bool
    payload_json: str
    def __init__(self, schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trigger: _Optional[_Union[_common_pb2.TriggerKind, str]] = ..., fencing_token: _Optional[int] = ..., fencing_scope: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., queue: _Optional[str] = ..., trace_id: _Optional[str] = ..., traceparent: _Optional[str] = ..., enqueue: _Optional[bool] = ..., payload_json: _Optional[str] = ...) -> None: ...

class RecordRunResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    created: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id", "traceparent")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    traceparent: str
    def __init__(self, run_id: _Optional[str] = ..., traceparent: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("schedule_id", "limit", "states", "schedule_ids", "lean")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEAN_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    limit: int
    states: _containers.RepeatedScalarFieldContainer[_common_pb2.RunState]
    schedule_ids: _containers.RepeatedScalarFieldContainer[str]
    lean: bool
    def __init__(self, schedule_id: _Optional[str] = ..., limit: _Optional[int] = ..., states: _Optional[_Iterable[_Union[_common_pb2.RunState, str]]] = ..., schedule_ids: _Optional[_Iterable[str]] = ..., lean: _Optional[bool] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ...) -> None: ...

class ListRecentRunsRequest(_message.Message):
    __slots__ = ("schedule_ids", "per_schedule")
    SCHEDULE_IDS_FIELD_NUMBER: _ClassVar[int]
    PER_SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule_ids: _containers.RepeatedScalarFieldContainer[str]
    per_schedule: int
    def __init__(self, schedule_ids: _Optional[_Iterable[str]] = ..., per_schedule: _Optional[int] = ...) -> None: ...

class ListRecentRunsResponse(_message.Message):
    __slots__ = ("runs", "left_out")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    LEFT_OUT_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    left_out: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ..., left_out: _Optional[_Iterable[str]] = ...) -> None: ...

class ListRunEventsRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class ListRunEventsResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_common_pb2.RunEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[_common_pb2.RunEvent, _Mapping]]] = ...) -> None: ...

class AppendRunEventRequest(_message.Message):
    __slots__ = ("run_id", "kind", "detail", "traceparent")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    kind: str
    detail: str
    traceparent: str
    def __init__(self, run_id: _Optional[str] = ..., kind: _Optional[str] = ..., detail: _Optional[str] = ..., traceparent: _Optional[str] = ...) -> None: ...

class ClaimRunRequest(_message.Message):
    __slots__ = ("run_id", "worker_id", "traceparent", "claim_key")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    CLAIM_KEY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    worker_id: str
    traceparent: str
    claim_key: str
    def __init__(self, run_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., traceparent: _Optional[str] = ..., claim_key: _Optional[str] = ...) -> None: ...

class ClaimRunResponse(_message.Message):
    __slots__ = ("run", "claimed", "attempt_token", "deadline_at")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    claimed: bool
    attempt_token: str
    deadline_at: _timestamp_pb2.Timestamp
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., claimed: _Optional[bool] = ..., attempt_token: _Optional[str] = ..., deadline_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("run_id", "attempt_token", "checkpoint_json", "body_started_at", "progress")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_JSON_FIELD_NUMBER: _ClassVar[int]
    BODY_STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt_token: str
    checkpoint_json: str
    body_started_at: _timestamp_pb2.Timestamp
    progress: _common_pb2.Progress
    def __init__(self, run_id: _Optional[str] = ..., attempt_token: _Optional[str] = ..., checkpoint_json: _Optional[str] = ..., body_started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., progress: _Optional[_Union[_common_pb2.Progress, _Mapping]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("deadline", "cancel_requested", "cancel_grace", "cancel_reason")
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_GRACE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    deadline: _timestamp_pb2.Timestamp
    cancel_requested: bool
    cancel_grace: _duration_pb2.Duration
    cancel_reason: str
    def __init__(self, deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., cancel_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cancel_reason: _Optional[str] = ...) -> None: ...

class CompleteRunRequest(_message.Message):
    __slots__ = ("run_id", "attempt_token", "state", "error", "result_json", "retry_after", "body_started_at", "traceparent")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    BODY_STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt_token: str
    state: _common_pb2.RunState
    error: str
    result_json: str
    retry_after: _duration_pb2.Duration
    body_started_at: _timestamp_pb2.Timestamp
    traceparent: str
    def __init__(self, run_id: _Optional[str] = ..., attempt_token: _Optional[str] = ..., state: _Optional[_Union[_common_pb2.RunState, str]] = ..., error: _Optional[str] = ..., result_json: _Optional[str] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., body_started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., traceparent: _Optional[str] = ...) -> None: ...

class CompleteRunResponse(_message.Message):
    __slots__ = ("run", "changed")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    changed: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class ReleaseRunRequest(_message.Message):
    __slots__ = ("run_id", "attempt_token", "checkpoint_json", "reason", "traceparent")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_JSON_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt_token: str
    checkpoint_json: str
    reason: str
    traceparent: str
    def __init__(self, run_id: _Optional[str] = ..., attempt_token: _Optional[str] = ..., checkpoint_json: _Optional[str] = ..., reason: _Optional[str] = ..., traceparent: _Optional[str] = ...) -> None: ...

class ReleaseRunResponse(_message.Message):
    __slots__ = ("run", "released")
    RUN_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    released: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., released: _Optional[bool] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id", "reason", "grace")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reason: str
    grace: _duration_pb2.Duration
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("run", "changed")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    changed: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class GetFencingTokenRequest(_message.Message):
    __slots__ = ("fencing_scope",)
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    fencing_scope: str
    def __init__(self, fencing_scope: _Optional[str] = ...) -> None: ...

class GetFencingTokenResponse(_message.Message):
    __slots__ = ("fencing_token",)
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    fencing_token: int
    def __init__(self, fencing_token: _Optional[int] = ...) -> None: ...

class IssueFencingTokenRequest(_message.Message):
    __slots__ = ("fencing_scope",)
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    fencing_scope: str
    def __init__(self, fencing_scope: _Optional[str] = ...) -> None: ...

class IssueFencingTokenResponse(_message.Message):
    __slots__ = ("fencing_token",)
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    fencing_token: int
    def __init__(self, fencing_token: _Optional[int] = ...) -> None: ...

class RequeueStalledRunsRequest(_message.Message):
    __slots__ = ("pending_for", "limit", "queue_waits")
    class QueueWaitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _duration_pb2.Duration
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
    PENDING_FOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_WAITS_FIELD_NUMBER: _ClassVar[int]
    pending_for: _duration_pb2.Duration
    limit: int
    queue_waits: _containers.MessageMap[str, _duration_pb2.Duration]
    def __init__(self, pending_for: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., limit: _Optional[int] = ..., queue_waits: _Optional[_Mapping[str, _duration_pb2.Duration]] = ...) -> None: ...

class StalledRun(_message.Message):
    __slots__ = ("run", "reason")
    RUN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    reason: str
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class RequeueStalledRunsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[StalledRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[StalledRun, _Mapping]]] = ...) -> None: ...

class RequeueLostRunsRequest(_message.Message):
    __slots__ = ("lost_at", "pending_for", "after_run_id", "limit")
    LOST_AT_FIELD_NUMBER: _ClassVar[int]
    PENDING_FOR_FIELD_NUMBER: _ClassVar[int]
    AFTER_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    lost_at: _timestamp_pb2.Timestamp
    pending_for: _duration_pb2.Duration
    after_run_id: str
    limit: int
    def __init__(self, lost_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_for: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., after_run_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class RequeueLostRunsResponse(_message.Message):
    __slots__ = ("runs", "next_after_run_id")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[StalledRun]
    next_after_run_id: str
    def __init__(self, runs: _Optional[_Iterable[_Union[StalledRun, _Mapping]]] = ..., next_after_run_id: _Optional[str] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("id", "run_id", "reason", "error", "queue", "job_type", "attempt", "message_json", "created_at", "replayed_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_JSON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_AT_FIELD_NUMBER: _ClassVar[int]
    id: int
    run_id: str
    reason: str
    error: str
    queue: str
    job_type: str
    attempt: int
    message_json: str
    created_at: _timestamp_pb2.Timestamp
    replayed_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., run_id: _Optional[str] = ..., reason: _Optional[str] = ..., error: _Optional[str] = ..., queue: _Optional[str] = ..., job_type: _Optional[str] = ..., attempt: _Optional[int] = ..., message_json: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., replayed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeadLetterRunRequest(_message.Message):
    __slots__ = ("run_id", "attempt_token", "reason", "error", "queue", "message_json")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_JSON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt_token: str
    reason: str
    error: str
    queue: str
    message_json: str
    def __init__(self, run_id: _Optional[str] = ..., attempt_token: _Optional[str] = ..., reason: _Optional[str] = ..., error: _Optional[str] = ..., queue: _Optional[str] = ..., message_json: _Optional[str] = ...) -> None: ...

class DeadLetterRunResponse(_message.Message):
    __slots__ = ("dead_letter", "run", "changed")
    DEAD_LETTER_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    dead_letter: DeadLetter
    run: _common_pb2.Run
    changed: bool
    def __init__(self, dead_letter: _Optional[_Union[DeadLetter, _Mapping]] = ..., run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("limit", "include_replayed")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REPLAYED_FIELD_NUMBER: _ClassVar[int]
    limit: int
    include_replayed: bool
    def __init__(self, limit: _Optional[int] = ..., include_replayed: _Optional[bool] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("dead_letters",)
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    dead_letters: _containers.RepeatedCompositeFieldContainer[DeadLetter]
    def __init__(self, dead_letters: _Optional[_Iterable[_Union[DeadLetter, _Mapping]]] = ...) -> None: ...

class ReplayDeadLetterRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class ReplayDeadLetterResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ...) -> None: ...

class LatestFireTimesRequest(_message.Message):
    __slots__ = ("schedule_ids", "after_schedule_id", "limit", "until")
    SCHEDULE_IDS_FIELD_NUMBER: _ClassVar[int]
    AFTER_SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    schedule_ids: _containers.RepeatedScalarFieldContainer[str]
    after_schedule_id: str
    limit: int
    until: _timestamp_pb2.Timestamp
    def __init__(self, schedule_ids: _Optional[_Iterable[str]] = ..., after_schedule_id: _Optional[str] = ..., limit: _Optional[int] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LatestFireTime(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "fires")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FIRES_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    fires: int
    def __init__(self, schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fires: _Optional[int] = ...) -> None: ...

class LatestFireTimesResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[LatestFireTime]
    def __init__(self, entries: _Optional[_Iterable[_Union[LatestFireTime, _Mapping]]] = ...) -> None: ...

class MissedSlot(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "reason", "trigger")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    reason: str
    trigger: _common_pb2.TriggerKind
    def __init__(self, schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., trigger: _Optional[_Union[_common_pb2.TriggerKind, str]] = ...) -> None: ...

class RecordMissedSlotsRequest(_message.Message):
    __slots__ = ("slots", "fencing_token", "fencing_scope")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    slots: _containers.RepeatedCompositeFieldContainer[MissedSlot]
    fencing_token: int
    fencing_scope: str
    def __init__(self, slots: _Optional[_Iterable[_Union[MissedSlot, _Mapping]]] = ..., fencing_token: _Optional[int] = ..., fencing_scope: _Optional[str] = ...) -> None: ...

class RecordMissedSlotsResponse(_message.Message):
    __slots__ = ("recorded", "unknown_schedules")
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    recorded: int
    unknown_schedules: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, recorded: _Optional[int] = ..., unknown_schedules: _Optional[_Iterable[str]] = ...) -> None: ...

class ListPendingFiresRequest(_message.Message):
    __slots__ = ("after_run_id", "limit")
    AFTER_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after_run_id: str
    limit: int
    def __init__(self, after_run_id: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListPendingFiresResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ...) -> None: ...

class RecordRunsRequest(_message.Message):
    __slots__ = ("runs", "with_payloads")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    WITH_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RecordRunRequest]
    with_payloads: bool
    def __init__(self, runs: _Optional[_Iterable[_Union[RecordRunRequest, _Mapping]]] = ..., with_payloads: _Optional[bool] = ...) -> None: ...

class RecordRunsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RecordRunResult]
    def __init__(self, results: _Optional[_Iterable[_Union[RecordRunResult, _Mapping]]] = ...) -> None: ...

class RecordRunResult(_message.Message):
    __slots__ = ("recorded", "error")
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    recorded: RecordRunResponse
    error: _common_pb2.ItemError
    def __init__(self, recorded: _Optional[_Union[RecordRunResponse, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ItemError, _Mapping]] = ...) -> None: ...

class AppendRunEventsRequest(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AppendRunEventRequest]
    def __init__(self, events: _Optional[_Iterable[_Union[AppendRunEventRequest, _Mapping]]] = ...) -> None: ...

class AppendRunEventsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendRunEventResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AppendRunEventResult, _Mapping]]] = ...) -> None: ...

class AppendRunEventResult(_message.Message):
    __slots__ = ("event", "error")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    event: _common_pb2.RunEvent
    error: _common_pb2.ItemError
    def __init__(self, event: _Optional[_Union[_common_pb2.RunEvent, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ItemError, _Mapping]] = ...) -> None: ...

class ClaimRunsRequest(_message.Message):
    __slots__ = ("claims", "queues")
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    claims: _containers.RepeatedCompositeFieldContainer[ClaimRunRequest]
    queues: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, claims: _Optional[_Iterable[_Union[ClaimRunRequest, _Mapping]]] = ..., queues: _Optional[_Iterable[str]] = ...) -> None: ...

class ClaimRunsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ClaimRunResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ClaimRunResult, _Mapping]]] = ...) -> None: ...

class ClaimRunResult(_message.Message):
    __slots__ = ("claim", "error")
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    claim: ClaimRunResponse
    error: _common_pb2.ItemError
    def __init__(self, claim: _Optional[_Union[ClaimRunResponse, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ItemError, _Mapping]] = ...) -> None: ...

class HeartbeatsRequest(_message.Message):
    __slots__ = ("beats",)
    BEATS_FIELD_NUMBER: _ClassVar[int]
    beats: _containers.RepeatedCompositeFieldContainer[HeartbeatRequest]
    def __init__(self, beats: _Optional[_Iterable[_Union[HeartbeatRequest, _Mapping]]] = ...) -> None: ...

class HeartbeatsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[HeartbeatResult]
    def __init__(self, results: _Optional[_Iterable[_Union[HeartbeatResult, _Mapping]]] = ...) -> None: ...

class HeartbeatResult(_message.Message):
    __slots__ = ("beat", "error")
    BEAT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    beat: HeartbeatResponse
    error: _common_pb2.ItemError
    def __init__(self, beat: _Optional[_Union[HeartbeatResponse, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ItemError, _Mapping]] = ...) -> None: ...

class CompleteRunsRequest(_message.Message):
    __slots__ = ("completions",)
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    completions: _containers.RepeatedCompositeFieldContainer[CompleteRunRequest]
    def __init__(self, completions: _Optional[_Iterable[_Union[CompleteRunRequest, _Mapping]]] = ...) -> None: ...

class CompleteRunsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CompleteRunResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CompleteRunResult, _Mapping]]] = ...) -> None: ...

class CompleteRunResult(_message.Message):
    __slots__ = ("completion", "error")
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    completion: CompleteRunResponse
    error: _common_pb2.ItemError
    def __init__(self, completion: _Optional[_Union[CompleteRunResponse, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ItemError, _Mapping]] = ...) -> None: ...

class GetRunsRequest(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[GetRunRequest]
    def __init__(self, runs: _Optional[_Iterable[_Union[GetRunRequest, _Mapping]]] = ...) -> None: ...

class GetRunsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("id", "at", "actor", "peer", "rpc", "schedule_id", "run_id", "changes_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    RPC_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGES_JSON_FIELD_NUMBER: _ClassVar[int]
    id: int
    at: _timestamp_pb2.Timestamp
    actor: str
    peer: str
    rpc: str
    schedule_id: str
    run_id: str
    changes_json: str
    def __init__(self, id: _Optional[int] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., peer: _Optional[str] = ..., rpc: _Optional[str] = ..., schedule_id: _Optional[str] = ..., run_id: _Optional[str] = ..., changes_json: _Optional[str] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("schedule_id", "limit", "before_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    limit: int
    before_id: int
    def __init__(self, schedule_id: _Optional[str] = ..., limit: _Optional[int] = ..., before_id: _Optional[int] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events", "next_before_id")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_BEFORE_ID_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    next_before_id: int
    def __init__(self, events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ..., next_before_id: _Optional[int] = ...) -> None: ...

class DeadlineDelivery(_message.Message):
    __slots__ = ("url", "format", "status", "attempts", "http_status", "error", "updated_at")
    URL_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    url: str
    format: _common_pb2.NotifyFormat
    status: str
    attempts: int
    http_status: int
    error: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, url: _Optional[str] = ..., format: _Optional[_Union[_common_pb2.NotifyFormat, str]] = ..., status: _Optional[str] = ..., attempts: _Optional[int] = ..., http_status: _Optional[int] = ..., error: _Optional[str] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeadlineBreach(_message.Message):
    __slots__ = ("id", "schedule_id", "fire_time", "deadline_at", "reason", "cause", "run_id", "run_state", "detected_at", "deliveries")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_STATE_FIELD_NUMBER: _ClassVar[int]
    DETECTED_AT_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    id: int
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    deadline_at: _timestamp_pb2.Timestamp
    reason: str
    cause: str
    run_id: str
    run_state: _common_pb2.RunState
    detected_at: _timestamp_pb2.Timestamp
    deliveries: _containers.RepeatedCompositeFieldContainer[DeadlineDelivery]
    def __init__(self, id: _Optional[int] = ..., schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deadline_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., cause: _Optional[str] = ..., run_id: _Optional[str] = ..., run_state: _Optional[_Union[_common_pb2.RunState, str]] = ..., detected_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deliveries: _Optional[_Iterable[_Union[DeadlineDelivery, _Mapping]]] = ...) -> None: ...

class ListDeadlineBreachesRequest(_message.Message):
    __slots__ = ("schedule_id", "limit", "before_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    limit: int
    before_id: int
    def __init__(self, schedule_id: _Optional[str] = ..., limit: _Optional[int] = ..., before_id: _Optional[int] = ...) -> None: ...

class ListDeadlineBreachesResponse(_message.Message):
    __slots__ = ("breaches",)
    BREACHES_FIELD_NUMBER: _ClassVar[int]
    breaches: _containers.RepeatedCompositeFieldContainer[DeadlineBreach]
    def __init__(self, breaches: _Optional[_Iterable[_Union[DeadlineBreach, _Mapping]]] = ...) -> None: ...
