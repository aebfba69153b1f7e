"""An error keeps its kind across the wire (``cronwave_core.status``,
``cronwave_core.error_info``): every kind of ``errors.BY_REASON`` a servicer raises
behind the bootstrap is raised again by the caller as the same class, with the same
attributes and message; a status with no kind (the root, a class with no listed
ancestor, details too large, details the caller cannot read, a batch item) maps by
its status code to the base class, message unchanged. And every error the SDK
exports either has a reason or never crosses the wire."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import grpc
import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

import cronwave
from cronwave_core import errors
from cronwave_core.bootstrap import RunningServer, Service, UndecodableRequest, full_names
from cronwave_core.errors import BY_REASON, CronwaveError
from cronwave_core.status import (
    MAX_DETAILS_BYTES,
    error_from_item,
    error_from_rpc,
    item_error,
    relayed_status,
    rich_status,
)
from cronwave_core.suite import free_port
from tests.harness.tls import as_identity, hop_channel
from workflow_store.servicer import WorkflowStoreServicer

#: One error of every kind that crosses the wire with its kind.
SAMPLES: list[CronwaveError] = [
    errors.InvalidArgument("spec.cron[0]", "'every night' is not a cron expression"),
    errors.NotFound("job_type: no job type 'billing.nightly'"),
    errors.ScheduleNotFound("nightly-billing"),
    errors.RunNotFound("run_0000000000000000000000000"),
    errors.AlreadyExists("schedule_id: a schedule of the batch already exists"),
    errors.ScheduleExists("nightly-billing"),
    errors.FailedPrecondition("run is PENDING: run 'run_1' has no running attempt"),
    errors.ScheduleBusy("nightly-billing", [("run_1", "PENDING"), ("run_2", "RUNNING")]),
    errors.SchedulePaused("nightly-billing"),
    errors.StaleFencingToken("planner", 7, 8),
    errors.UnissuedFencingToken("planner", 99, scope_known=True),
    errors.StaleAttempt("run_1", 2, "RUNNING"),
    errors.RunNotEnqueued("run_1"),
    errors.LeaseHeldByAnother("planner", "planner-b", "planner-a"),
    errors.Unavailable("the workflow-store's database did not answer; retry"),
    errors.Unimplemented("this planner does not backfill"),
    errors.Unauthenticated("user client carries no role"),
    errors.PermissionDenied("service dispatcher may not call ClaimRuns"),
    errors.LeaseOwnedByAnother("planner", "planner-a"),
    errors.QueueNotServed("run_1", "billing", ["default"]),
    errors.ConfigurationError("CRONWAVE_RPC_TIMEOUT: not a duration"),
]

#: The errors the SDK exports that no server sends, and why.
NEVER_SENT: dict[type[CronwaveError], str] = {
    CronwaveError: "the root: a status with no kind maps by its code",
    cronwave.NonRetryable: "raised by a job; the worker records it as the run's error",
    cronwave.AttemptSuperseded: "raised into a job by its context",
    cronwave.WorkerStopping: "raised into a job by its context",
    cronwave.WaitTimeout: "raised by Client.wait_run itself",
}


class Call(grpc.RpcError, grpc.Call):
    """A call that ended with ``status``, as a stub raises it."""

    def __init__(self, status: grpc.Status) -> None:
        self.status = status

    def code(self) -> grpc.StatusCode:
        return self.status.code

    def details(self) -> str:
        return self.status.details

    def trailing_metadata(self) -> Any:
        return self.status.trailing_metadata

    def initial_metadata(self) -> Any:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


def sample_of(cls: type[CronwaveError]) -> CronwaveError:
    (sample,) = [e for e in SAMPLES if type(e) is cls]
    return sample


def name_of(error: CronwaveError) -> str:
    return type(error).__name__


def info_of(status: grpc.Status) -> error_details_pb2.ErrorInfo | None:
    (key, value), *_ = status.trailing_metadata
    assert key == "grpc-status-details-bin"
    details = status_pb2.Status.FromString(value).details
    if not details:
        return None
    info = error_details_pb2.ErrorInfo()
    details[0].Unpack(info)
    return info


def with_info(code: grpc.StatusCode, message: str, info: error_details_pb2.ErrorInfo) -> Call:
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    return Call(rpc_status.to_status(status))


# -- the table ----------------------------------------------------------------------------


def test_every_kind_of_the_table_has_a_sample() -> None:
    assert [type(e) for e in SAMPLES] == list(BY_REASON.values())


def test_the_table_covers_every_error_the_sdk_exports() -> None:
    exported = {
        value
        for value in (getattr(cronwave, name) for name in cronwave.__all__)
        if isinstance(value, type) and issubclass(value, CronwaveError)
    }
    assert exported - set(BY_REASON.values()) == set(NEVER_SENT)
    assert NEVER_SENT.keys() <= exported


def test_every_kind_cronwave_core_defines_has_a_reason() -> None:
    defined = {
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, CronwaveError)
    }
    assert defined - set(BY_REASON.values()) == {CronwaveError}


def test_reasons_are_stable_upper_snake_names() -> None:
    for reason in BY_REASON:
        assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", reason), reason


@pytest.mark.parametrize("error", [e for e in SAMPLES if hasattr(e, "field")], ids=name_of)
def test_a_kind_about_a_field_names_it_first_in_its_message(error: Any) -> None:
    assert error.message.startswith(f"{error.field}: ")


# -- the round trip -----------------------------------------------------------------------


@pytest.mark.parametrize("error", SAMPLES, ids=name_of)
def test_a_kind_comes_back_as_itself_through_its_status_details(error: CronwaveError) -> None:
    # Given the status a call that failed with the error ends with
    status = rich_status(error)

    # When the caller reads it
    back = error_from_rpc(Call(status))

    # Then it is the same class, with the same attributes and message
    assert type(back) is type(error)
    assert vars(back) == vars(error)
    assert str(back) == str(error) and back.status == error.status
    assert status.code.name == error.status and status.details == error.message


def test_the_details_name_the_reason_the_field_and_the_attributes() -> None:
    info = info_of(rich_status(errors.StaleFencingToken("planner", 7, 8)))

    assert info is not None
    assert (info.reason, info.domain) == ("STALE_FENCING_TOKEN", "cronwave")
    assert dict(info.metadata) == {
        "field": "fencing_token",
        "scope": "planner",
        "token": "7",
        "newest": "8",
    }
    busy = info_of(rich_status(errors.ScheduleBusy("s", [("run_1", "PENDING")])))
    assert busy is not None and busy.metadata["run_ids"] == '["run_1"]'


def test_a_class_not_in_the_table_travels_as_its_nearest_kind() -> None:
    error = UndecodableRequest("cronwave.v1.GetScheduleRequest")

    back = error_from_rpc(Call(rich_status(error)))

    assert type(back) is errors.InvalidArgument
    assert (back.field, back.rule, back.message) == (error.field, error.rule, error.message)


@pytest.mark.parametrize(
    "error",
    [
        CronwaveError("something nobody classified"),
        cronwave.NonRetryable("card declined"),  # FAILED_PRECONDITION, no listed ancestor
        errors.ScheduleBusy("s", [(f"run_{i:026d}", "PENDING") for i in range(200)]),
    ],
    ids=["root", "no-listed-ancestor", "details-too-large"],
)
def test_an_error_without_details_maps_by_its_code(error: CronwaveError) -> None:
    status = rich_status(error)

    back = error_from_rpc(Call(status))

    assert info_of(status) is None
    assert len(status.trailing_metadata[0][1]) <= MAX_DETAILS_BYTES
    base = errors.base_kind(error.status)
    assert type(back) is base and back.message == error.message
    assert back.status == error.status


@pytest.mark.parametrize(
    "info",
    [
        error_details_pb2.ErrorInfo(reason="SCHEDULE_EXPLODED", domain="cronwave"),
        error_details_pb2.ErrorInfo(
            reason="SCHEDULE_NOT_FOUND", domain="googleapis.com", metadata={"schedule_id": "s"}
        ),
        error_details_pb2.ErrorInfo(reason="SCHEDULE_NOT_FOUND", domain="cronwave"),
        error_details_pb2.ErrorInfo(
            reason="STALE_FENCING_TOKEN",
            domain="cronwave",
            metadata={"scope": "planner", "token": "seven", "newest": "8"},
        ),
        error_details_pb2.ErrorInfo(
            reason="SCHEDULE_BUSY",
            domain="cronwave",
            metadata={"schedule_id": "s", "run_ids": '{"run_1": 1}'},
        ),
    ],
    ids=["unknown-reason", "other-domain", "attribute-missing", "not-an-int", "not-a-list"],
)
def test_details_the_caller_cannot_read_map_by_the_code(
    info: error_details_pb2.ErrorInfo,
) -> None:
    back = error_from_rpc(with_info(grpc.StatusCode.NOT_FOUND, "schedule_id: gone", info))

    assert type(back) is errors.NotFound and back.message == "schedule_id: gone"


def test_a_status_whose_details_contradict_it_maps_by_its_code() -> None:
    status = rich_status(errors.ScheduleNotFound("s"))
    relabelled = status._replace(details="another message")

    back = error_from_rpc(Call(relabelled))

    assert type(back) is errors.NotFound and back.message == "another message"


@pytest.mark.parametrize("error", SAMPLES, ids=name_of)
def test_a_refused_batch_item_keeps_its_kind(error: errors.CronwaveError) -> None:
    back = error_from_item(item_error(error))

    assert type(back) is type(error)
    assert vars(back) == vars(error) and back.message == error.message


def test_a_batch_item_without_a_kind_maps_by_its_code() -> None:
    item = item_error(errors.StaleAttempt("run_1", 2, "RUNNING"))
    item.ClearField("kind")

    back = error_from_item(item)

    assert type(back) is errors.FailedPrecondition


def test_a_relayed_status_keeps_the_details() -> None:
    error = errors.ScheduleNotFound("nightly-billing")

    relayed = relayed_status(Call(rich_status(error)))

    back = error_from_rpc(Call(relayed))
    assert type(back) is errors.ScheduleNotFound and vars(back) == vars(error)


# -- over real gRPC -----------------------------------------------------------------------


class RefusingSchedules:
    """Schedules each refused with the sample its id names (the reason, in lower
    case)."""

    def get_schedule(self, schedule_id: str) -> Any:
        raise sample_of(BY_REASON[schedule_id.upper()])


class RefusingStore:
    """A store whose schedules are ``RefusingSchedules``."""

    schedules = RefusingSchedules()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The store's servicer over a ``RefusingStore``, behind the bootstrap."""
    port = free_port()

    def register(srv: grpc.Server) -> None:
        api_grpc.add_WorkflowStoreServiceServicer_to_server(
            WorkflowStoreServicer(RefusingStore()),  # type: ignore[arg-type]
            srv,
        )

    service = Service(
        name="workflow-store",
        address=f"127.0.0.1:{port}",
        register=register,
        service_names=full_names([api.DESCRIPTOR]),
    )
    running = RunningServer(
        service, timedelta(seconds=1), traced=True, tls=as_identity("workflow-store")
    )
    running.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        running.stop()


def test_every_kind_raised_by_a_servicer_is_raised_again_by_the_caller(server: str) -> None:
    with hop_channel(None, server) as channel:
        stub = api_grpc.WorkflowStoreServiceStub(channel)
        for reason, cls in BY_REASON.items():
            sample = sample_of(cls)
            # When the servicer fails the call with the error
            with pytest.raises(grpc.RpcError) as info:
                stub.GetSchedule(api.GetScheduleRequest(schedule_id=reason.lower()), timeout=10)

            # Then the caller's error is the same class, attributes and message
            back = error_from_rpc(info.value)
            assert type(back) is type(sample), reason
            assert vars(back) == vars(sample), reason


def copy_of(error: CronwaveError) -> CronwaveError:
    """A new error of ``error``'s class with its attributes (the samples stay as sent)."""
    copy = type(error).__new__(type(error))
    copy.__dict__.update(vars(error))
    copy.args = error.args
    return copy


@pytest.mark.parametrize("surface", [errors.CLI, errors.SDK])
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda e: type(e).__name__)
def test_a_hint_is_in_its_surface_words_and_added_once(sample: CronwaveError, surface: str) -> None:
    # Given an error of each kind, as a server sends it: in no surface's words
    error = copy_of(sample)
    sent = error.message
    assert "--" not in sent and "=True" not in sent and "`cronwave " not in sent, sent

    # When a surface adds its hint, twice (the SDK's client inside the CLI, say)
    hinted = error.hinted(surface).hinted(surface)

    # Then a kind with a hint there carries it once, formatted with its attributes,
    # in that surface's words only
    assert hinted is error
    if surface not in type(error).hints:
        assert error.message == sent
        return
    hint = error.message.removeprefix(sent + "; ")
    assert hint != error.message and "{" not in hint and hint not in sent
    assert str(error) == error.message
    if surface == errors.CLI:
        assert "Client." not in hint and "=True" not in hint, hint
    else:
        assert "--" not in hint and "cronwave " not in hint, hint
