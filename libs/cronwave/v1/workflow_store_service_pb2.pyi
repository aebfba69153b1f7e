import datetime

from cronwave.v1 import common_pb2 as _common_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateScheduleRequest(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ...) -> None: ...

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

class ListSchedulesRequest(_message.Message):
    __slots__ = ("limit", "include_deleted")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DELETED_FIELD_NUMBER: _ClassVar[int]
    limit: int
    include_deleted: bool
    def __init__(self, limit: _Optional[int] = ..., include_deleted: _Optional[bool] = ...) -> None: ...

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
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: _common_pb2.Schedule
    def __init__(self, schedule: _Optional[_Union[_common_pb2.Schedule, _Mapping]] = ...) -> None: ...

class WatchSchedulesRequest(_message.Message):
    __slots__ = ("since_revision",)
    SINCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    since_revision: int
    def __init__(self, since_revision: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("schedule_id", "fire_time", "trigger", "fencing_token", "fencing_scope", "idempotency_key", "queue", "trace_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    trigger: _common_pb2.TriggerKind
    fencing_token: int
    fencing_scope: str
    idempotency_key: str
    queue: str
    trace_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trigger: _Optional[_Union[_common_pb2.TriggerKind, str]] = ..., fencing_token: _Optional[int] = ..., fencing_scope: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., queue: _Optional[str] = ..., trace_id: _Optional[str] = ...) -> None: ...

class RecordRunResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    created: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class RecordMissedRequest(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "reason", "fencing_token", "fencing_scope")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    reason: str
    fencing_token: int
    fencing_scope: str
    def __init__(self, schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., fencing_token: _Optional[int] = ..., fencing_scope: _Optional[str] = ...) -> None: ...

class RecordMissedResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    created: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("schedule_id", "limit", "states")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    limit: int
    states: _containers.RepeatedScalarFieldContainer[_common_pb2.RunState]
    def __init__(self, schedule_id: _Optional[str] = ..., limit: _Optional[int] = ..., states: _Optional[_Iterable[_Union[_common_pb2.RunState, str]]] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ...) -> None: ...

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
    __slots__ = ("run_id", "kind", "detail")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    kind: str
    detail: str
    def __init__(self, run_id: _Optional[str] = ..., kind: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class AppendRunEventResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _common_pb2.RunEvent
    def __init__(self, event: _Optional[_Union[_common_pb2.RunEvent, _Mapping]] = ...) -> None: ...

class ClaimRunRequest(_message.Message):
    __slots__ = ("run_id", "worker_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    worker_id: str
    def __init__(self, run_id: _Optional[str] = ..., worker_id: _Optional[str] = ...) -> None: ...

class ClaimRunResponse(_message.Message):
    __slots__ = ("run", "claimed", "attempt_token")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    claimed: bool
    attempt_token: int
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., claimed: _Optional[bool] = ..., attempt_token: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("run_id", "attempt_token", "checkpoint_json")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_JSON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt_token: int
    checkpoint_json: str
    def __init__(self, run_id: _Optional[str] = ..., attempt_token: _Optional[int] = ..., checkpoint_json: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("deadline",)
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CompleteRunRequest(_message.Message):
    __slots__ = ("run_id", "attempt_token", "state", "error", "result_json", "retry_after")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt_token: int
    state: _common_pb2.RunState
    error: str
    result_json: str
    retry_after: _duration_pb2.Duration
    def __init__(self, run_id: _Optional[str] = ..., attempt_token: _Optional[int] = ..., state: _Optional[_Union[_common_pb2.RunState, str]] = ..., error: _Optional[str] = ..., result_json: _Optional[str] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CompleteRunResponse(_message.Message):
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
