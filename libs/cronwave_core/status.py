"""Errors and gRPC statuses, both ways: the ``CronwaveError`` a failed call stands
for, and the ``ItemError`` of one refused item of a batch call.

A call that fails with a kind of ``errors.BY_REASON`` ends with a rich status: its
code and message, and a ``google.rpc.Status`` in the trailers (``grpc-status-details-bin``)
holding one ``google.rpc.ErrorInfo`` (``cronwave_core.error_info``: the kind's
reason, the request field it is about and its attributes) and, for an
``INVALID_ARGUMENT``, one ``google.rpc.BadRequest`` naming the field and the rule it
breaks, as any gRPC client reads one. The caller builds the same class with the same
attributes and the message unchanged. A status without a kind (the root
``CronwaveError``, a status from gRPC itself or another server, details too large
for the trailers) maps by its code alone, to ``errors.base_kind``; its message is
never read to decide more. A batch item's refusal (``ItemError``) carries its kind
the same way (``ItemError.kind``).
"""

from __future__ import annotations

import logging

import grpc
from cronwave_proto.v1 import common_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from cronwave_core import errors
from cronwave_core.error_info import error_from_info, error_info

log = logging.getLogger("cronwave")

#: The largest serialized ``google.rpc.Status`` a call ends with; an error whose
#: details would be larger (a ``ScheduleBusy`` naming some 75 runs) goes as its
#: code and message alone. Its trailers, base64 and the message again, then stay under
#: gRPC's 8 KiB soft limit on a reply's metadata: past its 16 KiB hard limit the caller
#: would see RESOURCE_EXHAUSTED instead of the error.
MAX_DETAILS_BYTES = 3072


def rich_status(error: errors.CronwaveError) -> grpc.Status:
    """The status a call that failed with ``error`` ends with: its status code and
    message, its ``ErrorInfo`` when it has a kind of ``errors.BY_REASON``, and a
    ``BadRequest`` when that kind is an ``INVALID_ARGUMENT`` about a field."""
    code = getattr(grpc.StatusCode, error.status, grpc.StatusCode.INTERNAL)
    status = status_pb2.Status(code=code.value[0], message=error.message)
    info = error_info(error)
    if info is None:
        return rpc_status.to_status(status)
    details: list[Message] = [info]
    if error.status == "INVALID_ARGUMENT" and "field" in info.metadata:
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=info.metadata["field"], description=info.metadata.get("rule", error.message)
        )
        details.append(error_details_pb2.BadRequest(field_violations=[violation]))
    while details:  # the BadRequest goes first: the ErrorInfo alone keeps the kind
        del status.details[:]
        for detail in details:
            status.details.add().Pack(detail)
        if status.ByteSize() <= MAX_DETAILS_BYTES:
            return rpc_status.to_status(status)
        details.pop()
    log.warning(
        "%s sent as %s alone: its details are %d bytes, over %d",
        info.reason,
        code.name,
        status.ByteSize(),
        MAX_DETAILS_BYTES,
    )
    del status.details[:]
    return rpc_status.to_status(status)


def error_from_rpc(exc: grpc.RpcError) -> errors.CronwaveError:
    """The cronwave error that a failed call stands for, message unchanged: the kind
    its status details name, else the base kind of its status code."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    name = code.name if code is not None else "UNKNOWN"
    found = _details(exc)
    for info in found:
        if isinstance(info, error_details_pb2.ErrorInfo):
            error = error_from_info(info, name, details or "")
            if error is not None:
                return error
    violations = [
        v for bad in found if isinstance(bad, error_details_pb2.BadRequest)
        for v in bad.field_violations
    ]  # fmt: skip
    return error_from_status(name, details or "", violations[0] if violations else None)


def _details(exc: grpc.RpcError) -> list[Message]:
    """The ``ErrorInfo`` and ``BadRequest`` details of a failed call (none for an
    error that is no call, such as a batch item's ``ItemRefused``, or whose details
    contradict its status)."""
    if not isinstance(exc, grpc.Call):
        return []
    try:
        status = rpc_status.from_call(exc)
    except ValueError:
        return []
    found: list[Message] = []
    for detail in status.details if status is not None else ():
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest):
            if detail.Is(kind.DESCRIPTOR):
                message = kind()
                detail.Unpack(message)
                found.append(message)
    return found


def relayed_status(exc: grpc.RpcError) -> grpc.Status:
    """The status ``exc`` ended with, details included: for a server that ends its
    own call as the one it made ended."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    if isinstance(exc, grpc.Call):
        try:
            status = rpc_status.from_call(exc)
        except ValueError:
            status = None
        if status is not None:
            return rpc_status.to_status(status)
    return rpc_status.to_status(status_pb2.Status(code=code.value[0], message=details or code.name))


def error_from_status(
    name: str,
    details: str,
    violation: error_details_pb2.BadRequest.FieldViolation | None = None,
) -> errors.CronwaveError:
    """The cronwave error for a gRPC status (by name) and its message that came with
    no kind: the base kind of the code (``errors.base_kind``), message unchanged. An
    ``InvalidArgument`` names the field of ``violation`` (a ``BadRequest``'s), else
    none (``field`` empty, ``rule`` the message): the message is never parsed."""
    cls = errors.base_kind(name)
    err = cls.__new__(cls)
    errors.CronwaveError.__init__(err, details or name)
    if isinstance(err, errors.InvalidArgument):
        err.field = violation.field if violation is not None else ""
        err.rule = violation.description if violation is not None else err.message
    err.status = name
    return err


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def status_code(number: int) -> grpc.StatusCode:
    """The gRPC status code an ``ItemError.code`` number stands for."""
    return _CODES.get(number, grpc.StatusCode.UNKNOWN)


def error_from_item(item: common_pb2.ItemError) -> errors.CronwaveError:
    """The cronwave error one item of a batch call was refused with: the kind its
    ``kind`` names, else the base class of its code."""
    name = status_code(item.code).name
    if item.HasField("kind"):
        info = error_details_pb2.ErrorInfo(
            reason=item.kind.reason, domain=item.kind.domain, metadata=dict(item.kind.metadata)
        )
        error = error_from_info(info, name, item.message)
        if error is not None:
            return error
    return error_from_status(name, item.message)


def item_error(exc: errors.CronwaveError) -> common_pb2.ItemError:
    """One item's refusal in a batch answer: the status its single call would end
    with, and its kind."""
    code = getattr(grpc.StatusCode, exc.status, grpc.StatusCode.UNKNOWN)
    item = common_pb2.ItemError(code=code.value[0], message=exc.message)
    info = error_info(exc)
    if info is not None:
        item.kind.reason, item.kind.domain = info.reason, info.domain
        item.kind.metadata.update(info.metadata)
    return item
