import datetime

from cronwave_proto.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StartRunRequest(_message.Message):
    __slots__ = ("schedule_id", "fire_time", "fencing_token", "fencing_scope", "idempotency_key", "trigger", "traceparent")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCING_SCOPE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    fire_time: _timestamp_pb2.Timestamp
    fencing_token: int
    fencing_scope: str
    idempotency_key: str
    trigger: _common_pb2.TriggerKind
    traceparent: str
    def __init__(self, schedule_id: _Optional[str] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fencing_token: _Optional[int] = ..., fencing_scope: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., trigger: _Optional[_Union[_common_pb2.TriggerKind, str]] = ..., traceparent: _Optional[str] = ...) -> None: ...

class StartRunResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    created: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class TriggerRunRequest(_message.Message):
    __slots__ = ("schedule_id", "idempotency_key", "payload_json")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    idempotency_key: str
    payload_json: str
    def __init__(self, schedule_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., payload_json: _Optional[str] = ...) -> None: ...

class TriggerRunResponse(_message.Message):
    __slots__ = ("run", "created")
    RUN_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    created: bool
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class StartRunsRequest(_message.Message):
    __slots__ = ("starts",)
    STARTS_FIELD_NUMBER: _ClassVar[int]
    starts: _containers.RepeatedCompositeFieldContainer[StartRunRequest]
    def __init__(self, starts: _Optional[_Iterable[_Union[StartRunRequest, _Mapping]]] = ...) -> None: ...

class StartRunsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[StartRunResult]
    def __init__(self, results: _Optional[_Iterable[_Union[StartRunResult, _Mapping]]] = ...) -> None: ...

class StartRunResult(_message.Message):
    __slots__ = ("started", "error")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    started: StartRunResponse
    error: _common_pb2.ItemError
    def __init__(self, started: _Optional[_Union[StartRunResponse, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ItemError, _Mapping]] = ...) -> None: ...
