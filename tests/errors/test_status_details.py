"""What a refusal's status details hold besides the kind (``cronwave_core.status``): an
``INVALID_ARGUMENT`` also carries a ``google.rpc.BadRequest`` naming the field and
the rule, as any gRPC client reads one; a status that comes with no kind maps to the
base kind of its code (``errors.base_kind``, read off the one table), and its message
is never parsed to decide its kind or its field."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from cronwave_core import errors
from cronwave_core.errors import BY_REASON, CronwaveError
from cronwave_core.status import MAX_DETAILS_BYTES, error_from_rpc, rich_status
from tests.errors.test_kinds import Call

INVALID = errors.InvalidArgument("spec.cron[0]", "'every night' is not a cron expression")


def details_of(status: grpc.Status) -> list[str]:
    """The full names of the messages ``status``'s details hold, in order."""
    read = rpc_status.from_call(Call(status))
    assert read is not None
    return [detail.TypeName() for detail in read.details]


def bad_request_of(status: grpc.Status) -> error_details_pb2.BadRequest:
    read = rpc_status.from_call(Call(status))
    assert read is not None
    (bad,) = [d for d in read.details if d.Is(error_details_pb2.BadRequest.DESCRIPTOR)]
    found = error_details_pb2.BadRequest()
    bad.Unpack(found)
    return found


def status_with(code: grpc.StatusCode, message: str, *details: Message) -> grpc.Status:
    packed = []
    for detail in details:
        one = any_pb2.Any()
        one.Pack(detail)
        packed.append(one)
    return rpc_status.to_status(
        status_pb2.Status(code=code.value[0], message=message, details=packed)
    )


def test_an_invalid_argument_names_its_field_in_a_bad_request() -> None:
    # When a call is refused for a field that breaks a rule
    status = rich_status(INVALID)

    # Then its details hold its kind, then the field and the rule as a BadRequest
    assert details_of(status) == ["google.rpc.ErrorInfo", "google.rpc.BadRequest"]
    (violation,) = bad_request_of(status).field_violations
    assert (violation.field, violation.description) == (INVALID.field, INVALID.rule)


@pytest.mark.parametrize(
    "error",
    [errors.ScheduleNotFound("s"), errors.StaleFencingToken("planner", 7, 8)],
    ids=["not-found", "failed-precondition"],
)
def test_a_refusal_of_another_code_carries_its_kind_alone(error: CronwaveError) -> None:
    assert details_of(rich_status(error)) == ["google.rpc.ErrorInfo"]


def test_details_too_large_for_both_keep_the_kind_and_drop_the_bad_request() -> None:
    # Given a rule long enough that its ErrorInfo fits, but not with a BadRequest too
    error = errors.InvalidArgument("payload", "x" * 1100)

    # When the call is refused with it
    status = rich_status(error)
    back = error_from_rpc(Call(status))

    # Then the kind and its attributes still come back whole
    assert details_of(status) == ["google.rpc.ErrorInfo"]
    assert len(status.trailing_metadata[0][1]) <= MAX_DETAILS_BYTES
    assert type(back) is errors.InvalidArgument and vars(back) == vars(error)


def test_a_bad_request_without_a_kind_names_the_field() -> None:
    # Given an INVALID_ARGUMENT as another gRPC server sends it: a BadRequest alone
    violation = error_details_pb2.BadRequest.FieldViolation(
        field="page_size", description="must be at most 500"
    )
    bad = error_details_pb2.BadRequest(field_violations=[violation])
    status = status_with(grpc.StatusCode.INVALID_ARGUMENT, "page size too big", bad)

    # When the caller reads it
    back = error_from_rpc(Call(status))

    # Then it is an InvalidArgument naming that field and rule, message unchanged
    assert type(back) is errors.InvalidArgument
    assert (back.field, back.rule, back.message) == (
        "page_size",
        "must be at most 500",
        "page size too big",
    )


def test_a_message_is_never_parsed_for_a_field() -> None:
    # Given an INVALID_ARGUMENT with no details whose message reads like "field: rule"
    status = status_with(grpc.StatusCode.INVALID_ARGUMENT, "schedule_id: required")

    # When the caller reads it
    back = error_from_rpc(Call(status))

    # Then it is an InvalidArgument that names no field, its message unchanged
    assert type(back) is errors.InvalidArgument
    assert (back.field, back.rule) == ("", "schedule_id: required")
    assert back.message == "schedule_id: required"


@pytest.mark.parametrize(
    "reason", [r for r, cls in BY_REASON.items() if cls.status == r], ids=str.lower
)
def test_a_status_without_a_kind_is_the_base_kind_of_its_code(reason: str) -> None:
    status = status_with(getattr(grpc.StatusCode, reason), "refused")

    back = error_from_rpc(Call(status))

    assert type(back) is BY_REASON[reason] and back.message == "refused"
    assert back.status == reason


@pytest.mark.parametrize("code", ["INTERNAL", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"])
def test_a_code_no_kind_stands_for_is_the_root(code: str) -> None:
    back = error_from_rpc(Call(status_with(getattr(grpc.StatusCode, code), "went wrong")))

    assert type(back) is CronwaveError and back.status == code
    assert back.message == "went wrong"


def test_every_base_kind_is_its_status_name() -> None:
    # The fallback reads the one table: a base kind is the one whose reason is its code
    bases = {cls for reason, cls in BY_REASON.items() if cls.status == reason}
    assert bases == {
        errors.InvalidArgument,
        errors.NotFound,
        errors.AlreadyExists,
        errors.FailedPrecondition,
        errors.Unavailable,
        errors.Unimplemented,
        errors.Unauthenticated,
        errors.PermissionDenied,
    }
