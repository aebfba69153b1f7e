import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    RUN_STATE_PENDING: _ClassVar[RunState]
    RUN_STATE_RUNNING: _ClassVar[RunState]
    RUN_STATE_SUCCEEDED: _ClassVar[RunState]
    RUN_STATE_FAILED: _ClassVar[RunState]
    RUN_STATE_TIMED_OUT: _ClassVar[RunState]
    RUN_STATE_MISSED: _ClassVar[RunState]
    RUN_STATE_CANCELLED: _ClassVar[RunState]
    RUN_STATE_DEAD_LETTERED: _ClassVar[RunState]
    RUN_STATE_WAITING: _ClassVar[RunState]

class TriggerKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRIGGER_KIND_UNSPECIFIED: _ClassVar[TriggerKind]
    TRIGGER_KIND_SCHEDULED: _ClassVar[TriggerKind]
    TRIGGER_KIND_MANUAL: _ClassVar[TriggerKind]
    TRIGGER_KIND_BACKFILL: _ClassVar[TriggerKind]
    TRIGGER_KIND_CATCHUP: _ClassVar[TriggerKind]

class DstGapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DST_GAP_POLICY_UNSPECIFIED: _ClassVar[DstGapPolicy]
    DST_GAP_POLICY_SHIFT: _ClassVar[DstGapPolicy]
    DST_GAP_POLICY_SKIP: _ClassVar[DstGapPolicy]

class DstRepeatPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DST_REPEAT_POLICY_UNSPECIFIED: _ClassVar[DstRepeatPolicy]
    DST_REPEAT_POLICY_ONCE: _ClassVar[DstRepeatPolicy]
    DST_REPEAT_POLICY_LAST: _ClassVar[DstRepeatPolicy]
    DST_REPEAT_POLICY_TWICE: _ClassVar[DstRepeatPolicy]

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_POLICY_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ONE: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ALL: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_CANCEL_OTHER: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_ALLOW_ALL: _ClassVar[OverlapPolicy]

class CatchupPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATCHUP_POLICY_UNSPECIFIED: _ClassVar[CatchupPolicy]
    CATCHUP_POLICY_SKIP: _ClassVar[CatchupPolicy]
    CATCHUP_POLICY_LATEST: _ClassVar[CatchupPolicy]
    CATCHUP_POLICY_ALL: _ClassVar[CatchupPolicy]

class NotifyFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NOTIFY_FORMAT_UNSPECIFIED: _ClassVar[NotifyFormat]
    NOTIFY_FORMAT_JSON: _ClassVar[NotifyFormat]
    NOTIFY_FORMAT_SLACK: _ClassVar[NotifyFormat]
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_PENDING: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_SUCCEEDED: RunState
RUN_STATE_FAILED: RunState
RUN_STATE_TIMED_OUT: RunState
RUN_STATE_MISSED: RunState
RUN_STATE_CANCELLED: RunState
RUN_STATE_DEAD_LETTERED: RunState
RUN_STATE_WAITING: RunState
TRIGGER_KIND_UNSPECIFIED: TriggerKind
TRIGGER_KIND_SCHEDULED: TriggerKind
TRIGGER_KIND_MANUAL: TriggerKind
TRIGGER_KIND_BACKFILL: TriggerKind
TRIGGER_KIND_CATCHUP: TriggerKind
DST_GAP_POLICY_UNSPECIFIED: DstGapPolicy
DST_GAP_POLICY_SHIFT: DstGapPolicy
DST_GAP_POLICY_SKIP: DstGapPolicy
DST_REPEAT_POLICY_UNSPECIFIED: DstRepeatPolicy
DST_REPEAT_POLICY_ONCE: DstRepeatPolicy
DST_REPEAT_POLICY_LAST: DstRepeatPolicy
DST_REPEAT_POLICY_TWICE: DstRepeatPolicy
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_BUFFER_ONE: OverlapPolicy
OVERLAP_POLICY_BUFFER_ALL: OverlapPolicy
OVERLAP_POLICY_CANCEL_OTHER: OverlapPolicy
OVERLAP_POLICY_ALLOW_ALL: OverlapPolicy
CATCHUP_POLICY_UNSPECIFIED: CatchupPolicy
CATCHUP_POLICY_SKIP: CatchupPolicy
CATCHUP_POLICY_LATEST: CatchupPolicy
CATCHUP_POLICY_ALL: CatchupPolicy
NOTIFY_FORMAT_UNSPECIFIED: NotifyFormat
NOTIFY_FORMAT_JSON: NotifyFormat
NOTIFY_FORMAT_SLACK: NotifyFormat

class IntervalSpec(_message.Message):
    __slots__ = ("every", "phase")
    EVERY_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    every: _duration_pb2.Duration
    phase: _duration_pb2.Duration
    def __init__(self, every: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., phase: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ScheduleSpec(_message.Message):
    __slots__ = ("cron", "time_zone", "dst_gap", "dst_repeat", "exclude_dates", "start_at", "end_at", "max_runs", "intervals", "one_off", "jitter")
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    DST_GAP_FIELD_NUMBER: _ClassVar[int]
    DST_REPEAT_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_DATES_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    END_AT_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    ONE_OFF_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    cron: _containers.RepeatedScalarFieldContainer[str]
    time_zone: str
    dst_gap: DstGapPolicy
    dst_repeat: DstRepeatPolicy
    exclude_dates: _containers.RepeatedScalarFieldContainer[str]
    start_at: _timestamp_pb2.Timestamp
    end_at: _timestamp_pb2.Timestamp
    max_runs: int
    intervals: _containers.RepeatedCompositeFieldContainer[IntervalSpec]
    one_off: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    jitter: _duration_pb2.Duration
    def __init__(self, cron: _Optional[_Iterable[str]] = ..., time_zone: _Optional[str] = ..., dst_gap: _Optional[_Union[DstGapPolicy, str]] = ..., dst_repeat: _Optional[_Union[DstRepeatPolicy, str]] = ..., exclude_dates: _Optional[_Iterable[str]] = ..., start_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_runs: _Optional[int] = ..., intervals: _Optional[_Iterable[_Union[IntervalSpec, _Mapping]]] = ..., one_off: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., jitter: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Notifier(_message.Message):
    __slots__ = ("url", "format")
    URL_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    url: str
    format: NotifyFormat
    def __init__(self, url: _Optional[str] = ..., format: _Optional[_Union[NotifyFormat, str]] = ...) -> None: ...

class SchedulePolicy(_message.Message):
    __slots__ = ("overlap", "catchup", "catchup_window", "catchup_max_runs", "deadline", "notifiers", "trace_sample")
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    NOTIFIERS_FIELD_NUMBER: _ClassVar[int]
    TRACE_SAMPLE_FIELD_NUMBER: _ClassVar[int]
    overlap: OverlapPolicy
    catchup: CatchupPolicy
    catchup_window: _duration_pb2.Duration
    catchup_max_runs: int
    deadline: _duration_pb2.Duration
    notifiers: _containers.RepeatedCompositeFieldContainer[Notifier]
    trace_sample: float
    def __init__(self, overlap: _Optional[_Union[OverlapPolicy, str]] = ..., catchup: _Optional[_Union[CatchupPolicy, str]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., catchup_max_runs: _Optional[int] = ..., deadline: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., notifiers: _Optional[_Iterable[_Union[Notifier, _Mapping]]] = ..., trace_sample: _Optional[float] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("schedule_id", "spec", "policy", "job_type", "payload_json", "paused", "pause_note", "created_at", "updated_at", "revision", "deleted", "withheld", "managed_by", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PAUSE_NOTE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_FIELD_NUMBER: _ClassVar[int]
    MANAGED_BY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    spec: ScheduleSpec
    policy: SchedulePolicy
    job_type: str
    payload_json: str
    paused: bool
    pause_note: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    revision: int
    deleted: bool
    withheld: str
    managed_by: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, schedule_id: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., policy: _Optional[_Union[SchedulePolicy, _Mapping]] = ..., job_type: _Optional[str] = ..., payload_json: _Optional[str] = ..., paused: _Optional[bool] = ..., pause_note: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revision: _Optional[int] = ..., deleted: _Optional[bool] = ..., withheld: _Optional[str] = ..., managed_by: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("initial_interval", "backoff_coefficient", "maximum_interval", "maximum_attempts", "non_retryable_errors")
    INITIAL_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_COEFFICIENT_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_ERRORS_FIELD_NUMBER: _ClassVar[int]
    initial_interval: _duration_pb2.Duration
    backoff_coefficient: float
    maximum_interval: _duration_pb2.Duration
    maximum_attempts: int
    non_retryable_errors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, initial_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_coefficient: _Optional[float] = ..., maximum_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., maximum_attempts: _Optional[int] = ..., non_retryable_errors: _Optional[_Iterable[str]] = ...) -> None: ...

class JobType(_message.Message):
    __slots__ = ("name", "duration_limit", "heartbeat_timeout", "retry", "queue", "priority", "financial")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DURATION_LIMIT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    FINANCIAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    duration_limit: _duration_pb2.Duration
    heartbeat_timeout: _duration_pb2.Duration
    retry: RetryPolicy
    queue: str
    priority: int
    financial: bool
    def __init__(self, name: _Optional[str] = ..., duration_limit: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., heartbeat_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., queue: _Optional[str] = ..., priority: _Optional[int] = ..., financial: _Optional[bool] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "schedule_id", "fire_time", "state", "trigger", "job_type", "payload_json", "attempt", "fencing_token", "idempotency_key", "created_at", "started_at", "finished_at", "error", "result_json", "checkpoint_json", "queue", "worker_id", "trace_id", "heartbeat_at", "claimed_at", "cancel_deadline", "cancel_reason", "progress")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_JSON_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AT_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    state: RunState
    trigger: TriggerKind
    job_type: str
    payload_json: str
    attempt: int
    fencing_token: int
    idempotency_key: str
    created_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    error: str
    result_json: str
    checkpoint_json: str
    queue: str
    worker_id: str
    trace_id: str
    heartbeat_at: _timestamp_pb2.Timestamp
    claimed_at: _timestamp_pb2.Timestamp
    cancel_deadline: _timestamp_pb2.Timestamp
    cancel_reason: str
    progress: Progress
    def __init__(self, run_id: _Optional[str] = ..., schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[_Union[RunState, str]] = ..., trigger: _Optional[_Union[TriggerKind, str]] = ..., job_type: _Optional[str] = ..., payload_json: _Optional[str] = ..., attempt: _Optional[int] = ..., fencing_token: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., result_json: _Optional[str] = ..., checkpoint_json: _Optional[str] = ..., queue: _Optional[str] = ..., worker_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., heartbeat_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., claimed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_reason: _Optional[str] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("done", "total", "unit", "at")
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    done: int
    total: int
    unit: str
    at: _timestamp_pb2.Timestamp
    def __init__(self, done: _Optional[int] = ..., total: _Optional[int] = ..., unit: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("seq", "run_id", "kind", "at", "detail", "attempt")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    seq: int
    run_id: str
    kind: str
    at: _timestamp_pb2.Timestamp
    detail: str
    attempt: int
    def __init__(self, seq: _Optional[int] = ..., run_id: _Optional[str] = ..., kind: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ("code", "message", "kind")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    kind: ErrorKind
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., kind: _Optional[_Union[ErrorKind, _Mapping]] = ...) -> None: ...

class ErrorKind(_message.Message):
    __slots__ = ("reason", "domain", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REASON_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    reason: str
    domain: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, reason: _Optional[str] = ..., domain: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
