from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetWorkerStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetWorkerStatusResponse(_message.Message):
    __slots__ = ("worker_id", "queues", "job_types", "runs_started", "runs_finished", "busy")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    RUNS_STARTED_FIELD_NUMBER: _ClassVar[int]
    RUNS_FINISHED_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    job_types: _containers.RepeatedScalarFieldContainer[str]
    runs_started: int
    runs_finished: int
    busy: int
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., job_types: _Optional[_Iterable[str]] = ..., runs_started: _Optional[int] = ..., runs_finished: _Optional[int] = ..., busy: _Optional[int] = ...) -> None: ...
