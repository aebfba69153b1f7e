import datetime

from cronwave.v1 import common_pb2 as _common_pb2
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
