"""Errors and gRPC statuses, both ways: the ``CronwaveError`` a failed call stands
for, and the ``ItemError`` of one refused item of a batch call."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import common_pb2

from cronwave_core import errors


def error_from_rpc(exc: grpc.RpcError) -> errors.CronwaveError:
    """The cronwave error that a failed call stands for, message unchanged."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return error_from_status(code.name if code is not None else "UNKNOWN", details or "")


def error_from_status(name: str, details: str) -> errors.CronwaveError:
    """The cronwave error for a gRPC status (by name) and its message."""
    cls = errors.BY_STATUS.get(name, errors.CronwaveError)
    if name == "INVALID_ARGUMENT":
        field, _, rule = details.partition(": ")
        return errors.InvalidArgument(field, rule)
    err = cls.__new__(cls)
    errors.CronwaveError.__init__(err, details or name)
    err.status = name
    return err


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """The gRPC status code an ``ItemError.code`` number stands for."""
    return _CODES.get(number, grpc.StatusCode.UNKNOWN)


def error_from_item(item: common_pb2.ItemError) -> errors.CronwaveError:
    """The cronwave error one item of a batch call was refused with."""
    return error_from_status(status_code(item.code).name, item.message)


def item_error(exc: errors.CronwaveError) -> common_pb2.ItemError:
    """One item's refusal in a batch answer: the status its single call would end with."""
    code = getattr(grpc.StatusCode, exc.status, grpc.StatusCode.UNKNOWN)
    return common_pb2.ItemError(code=code.value[0], message=exc.message)
