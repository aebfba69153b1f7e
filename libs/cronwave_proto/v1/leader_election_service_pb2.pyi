import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Lease(_message.Message):
    __slots__ = ("scope", "holder", "fencing_token", "ttl", "expires_at")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    scope: str
    holder: str
    fencing_token: int
    ttl: _duration_pb2.Duration
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, scope: _Optional[str] = ..., holder: _Optional[str] = ..., fencing_token: _Optional[int] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CampaignRequest(_message.Message):
    __slots__ = ("scope", "candidate", "ttl")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    scope: str
    candidate: str
    ttl: _duration_pb2.Duration
    def __init__(self, scope: _Optional[str] = ..., candidate: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ("granted", "lease")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    lease: Lease
    def __init__(self, granted: _Optional[bool] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ("scope", "candidate", "fencing_token")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope: str
    candidate: str
    fencing_token: int
    def __init__(self, scope: _Optional[str] = ..., candidate: _Optional[str] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ("renewed", "lease")
    RENEWED_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    renewed: bool
    lease: Lease
    def __init__(self, renewed: _Optional[bool] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("scope", "candidate", "fencing_token")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope: str
    candidate: str
    fencing_token: int
    def __init__(self, scope: _Optional[str] = ..., candidate: _Optional[str] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ("resigned",)
    RESIGNED_FIELD_NUMBER: _ClassVar[int]
    resigned: bool
    def __init__(self, resigned: _Optional[bool] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class ShardLease(_message.Message):
    __slots__ = ("shard", "fencing_token")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    shard: int
    fencing_token: int
    def __init__(self, shard: _Optional[int] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class SyncShardsRequest(_message.Message):
    __slots__ = ("candidate", "shard_count", "ttl", "held", "release", "want")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    SHARD_COUNT_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    WANT_FIELD_NUMBER: _ClassVar[int]
    candidate: str
    shard_count: int
    ttl: _duration_pb2.Duration
    held: _containers.RepeatedCompositeFieldContainer[ShardLease]
    release: _containers.RepeatedCompositeFieldContainer[ShardLease]
    want: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, candidate: _Optional[str] = ..., shard_count: _Optional[int] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., held: _Optional[_Iterable[_Union[ShardLease, _Mapping]]] = ..., release: _Optional[_Iterable[_Union[ShardLease, _Mapping]]] = ..., want: _Optional[_Iterable[int]] = ...) -> None: ...

class SyncShardsResponse(_message.Message):
    __slots__ = ("members", "held", "next_lapse")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    NEXT_LAPSE_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedScalarFieldContainer[str]
    held: _containers.RepeatedCompositeFieldContainer[ShardLease]
    next_lapse: _duration_pb2.Duration
    def __init__(self, members: _Optional[_Iterable[str]] = ..., held: _Optional[_Iterable[_Union[ShardLease, _Mapping]]] = ..., next_lapse: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
