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

class ChargeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHARGE_STATUS_UNSPECIFIED: _ClassVar[ChargeStatus]
    CHARGE_STATUS_SUCCEEDED: _ClassVar[ChargeStatus]
CHARGE_STATUS_UNSPECIFIED: ChargeStatus
CHARGE_STATUS_SUCCEEDED: ChargeStatus

class ChargeItem(_message.Message):
    __slots__ = ("idempotency_key", "customer_id", "invoice_id", "amount_cents", "currency")
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    INVOICE_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_CENTS_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    customer_id: str
    invoice_id: str
    amount_cents: int
    currency: str
    def __init__(self, idempotency_key: _Optional[str] = ..., customer_id: _Optional[str] = ..., invoice_id: _Optional[str] = ..., amount_cents: _Optional[int] = ..., currency: _Optional[str] = ...) -> None: ...

class Charge(_message.Message):
    __slots__ = ("charge_id", "idempotency_key", "customer_id", "invoice_id", "amount_cents", "currency", "status", "created_at", "seq")
    CHARGE_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_ID_FIELD_NUMBER: _ClassVar[int]
    INVOICE_ID_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_CENTS_FIELD_NUMBER: _ClassVar[int]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    charge_id: str
    idempotency_key: str
    customer_id: str
    invoice_id: str
    amount_cents: int
    currency: str
    status: ChargeStatus
    created_at: _timestamp_pb2.Timestamp
    seq: int
    def __init__(self, charge_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., customer_id: _Optional[str] = ..., invoice_id: _Optional[str] = ..., amount_cents: _Optional[int] = ..., currency: _Optional[str] = ..., status: _Optional[_Union[ChargeStatus, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class ChargeResult(_message.Message):
    __slots__ = ("charge", "replayed")
    CHARGE_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    charge: Charge
    replayed: bool
    def __init__(self, charge: _Optional[_Union[Charge, _Mapping]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class ChargeRequest(_message.Message):
    __slots__ = ("item",)
    ITEM_FIELD_NUMBER: _ClassVar[int]
    item: ChargeItem
    def __init__(self, item: _Optional[_Union[ChargeItem, _Mapping]] = ...) -> None: ...

class ChargeResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ChargeResult
    def __init__(self, result: _Optional[_Union[ChargeResult, _Mapping]] = ...) -> None: ...

class ChargeManyRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ChargeItem]
    def __init__(self, items: _Optional[_Iterable[_Union[ChargeItem, _Mapping]]] = ...) -> None: ...

class ChargeManyResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ChargeResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ChargeResult, _Mapping]]] = ...) -> None: ...

class ListChargesRequest(_message.Message):
    __slots__ = ("after_seq", "limit")
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    limit: int
    def __init__(self, after_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ListChargesResponse(_message.Message):
    __slots__ = ("charges", "next_after_seq")
    CHARGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    charges: _containers.RepeatedCompositeFieldContainer[Charge]
    next_after_seq: int
    def __init__(self, charges: _Optional[_Iterable[_Union[Charge, _Mapping]]] = ..., next_after_seq: _Optional[int] = ...) -> None: ...

class CountChargesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CountChargesResponse(_message.Message):
    __slots__ = ("charges", "invoices", "invoices_charged_twice", "amount_cents")
    CHARGES_FIELD_NUMBER: _ClassVar[int]
    INVOICES_FIELD_NUMBER: _ClassVar[int]
    INVOICES_CHARGED_TWICE_FIELD_NUMBER: _ClassVar[int]
    AMOUNT_CENTS_FIELD_NUMBER: _ClassVar[int]
    charges: int
    invoices: int
    invoices_charged_twice: int
    amount_cents: int
    def __init__(self, charges: _Optional[int] = ..., invoices: _Optional[int] = ..., invoices_charged_twice: _Optional[int] = ..., amount_cents: _Optional[int] = ...) -> None: ...

class SetFaultsRequest(_message.Message):
    __slots__ = ("timeout_after_commit", "hold")
    TIMEOUT_AFTER_COMMIT_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    timeout_after_commit: int
    hold: _duration_pb2.Duration
    def __init__(self, timeout_after_commit: _Optional[int] = ..., hold: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SetFaultsResponse(_message.Message):
    __slots__ = ("timeout_after_commit", "timeouts_served")
    TIMEOUT_AFTER_COMMIT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_SERVED_FIELD_NUMBER: _ClassVar[int]
    timeout_after_commit: int
    timeouts_served: int
    def __init__(self, timeout_after_commit: _Optional[int] = ..., timeouts_served: _Optional[int] = ...) -> None: ...
