import datetime

from cronwave.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StartRunRequest(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "fencing_token", "fencing_scope", "idempotency_key", "trigger")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    fencing_token: int
    fencing_scope: str
    idempotency_key: str
    trigger: _common_pb2.TriggerKind
    def __init__(self, schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fencing_token: _Optional[int] = ..., fencing_scope: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., trigger: _Optional[_Union[_common_pb2.TriggerKind, str]] = ...) -> None: ...

class StartRunResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    created: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class TriggerRunRequest(_message.Message):
    __slots__ = ("schedule_id", "idempotency_key")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    idempotency_key: str
    def __init__(self, schedule_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TriggerRunResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    created: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...
