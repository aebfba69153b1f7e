import datetime

from cronwave_proto.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetPlannerStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetPlannerStatusResponse(_message.Message):
    __slots__ = ("candidate", "leader", "fencing_token", "schedules", "next_fire_time", "next_schedule_id", "fired", "revision")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    NEXT_SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    candidate: str
    leader: bool
    fencing_token: int
    schedules: int
    next_fire_time: _timestamp_pb2.Timestamp
    next_schedule_id: str
    fired: int
    revision: int
    def __init__(self, candidate: _Optional[str] = ..., leader: _Optional[bool] = ..., fencing_token: _Optional[int] = ..., schedules: _Optional[int] = ..., next_fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_schedule_id: _Optional[str] = ..., fired: _Optional[int] = ..., revision: _Optional[int] = ...) -> None: ...

class PreviewFireTimesRequest(_message.Message):
    __slots__ = ("spec", "after", "count")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    spec: _common_pb2.ScheduleSpec
    after: _timestamp_pb2.Timestamp
    count: int
    def __init__(self, spec: _Optional[_Union[_common_pb2.ScheduleSpec, _Mapping]] = ..., after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...

class PreviewFireTimesResponse(_message.Message):
    __slots__ = ("fire_times",)
    FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    def __init__(self, fire_times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ...) -> None: ...

class BackfillRequest(_message.Message):
    __slots__ = ("schedule_id", "start", "end", "dry_run", "rate_per_second", "overlap")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    start: _timestamp_pb2.Timestamp
    end: _timestamp_pb2.Timestamp
    dry_run: bool
    rate_per_second: float
    overlap: _common_pb2.OverlapPolicy
    def __init__(self, schedule_id: _Optional[str] = ..., start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dry_run: _Optional[bool] = ..., rate_per_second: _Optional[float] = ..., overlap: _Optional[_Union[_common_pb2.OverlapPolicy, str]] = ...) -> None: ...

class BackfillResponse(_message.Message):
    __slots__ = ("fire_times", "dst_skipped", "dry_run", "finishes_at")
    FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    DST_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    FINISHES_AT_FIELD_NUMBER: _ClassVar[int]
    fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    dst_skipped: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    dry_run: bool
    finishes_at: _timestamp_pb2.Timestamp
    def __init__(self, fire_times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., dst_skipped: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., dry_run: _Optional[bool] = ..., finishes_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
