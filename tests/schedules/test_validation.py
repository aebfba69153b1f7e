"""Every malformed schedule is refused with INVALID_ARGUMENT naming the field, through
the SDK and a real workflow-store, and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave import Client, Interval, InvalidArgument, NotFound
from tests.harness.store import StoreProcess, register_job_type
from tests.helpers import fresh

pytestmark = pytest.mark.slow

LATER = datetime(2031, 1, 1, tzinfo=UTC)

# (what is wrong, create_schedule arguments, the field named)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("a minute of 61", {"cron": "61 * * * *"}, "spec.cron[0]"),
    ("the second of two crons", {"cron": ["0 * * * *", "not cron"]}, "spec.cron[1]"),
    ("too many fields", {"cron": "0 0 0 0 0 0 0"}, "spec.cron[0]"),
    ("L in the hour field", {"cron": "0 L * * *"}, "spec.cron[0]"),
    ("an unknown zone", {"cron": "0 2 * * *", "time_zone": "Mars/Olympus"}, "spec.time_zone"),
    ("no calendar at all", {}, "spec.cron"),
    (
        "February 30th",
        {"cron": "0 2 * * *", "exclude_dates": ["2030-02-30"]},
        "spec.exclude_dates[0]",
    ),
    ("a zero interval", {"intervals": [Interval(timedelta(0))]}, "spec.intervals[0].every"),
    (
        "a phase as long as the interval",
        {"intervals": [Interval(timedelta(minutes=15), timedelta(minutes=15))]},
        "spec.intervals[0].phase",
    ),
    (
        "end before start",
        {"cron": "* * * * *", "start_at": LATER, "end_at": LATER - timedelta(1)},
        "spec.end_at",
    ),
    (
        "a start before 1970",
        {"cron": "* * * * *", "start_at": datetime(1960, 1, 1, tzinfo=UTC)},
        "spec.start_at",
    ),
    ("a one-off past 9000", {"one_off": [datetime(9500, 1, 1, tzinfo=UTC)]}, "spec.one_off[0]"),
    ("a naive one-off", {"one_off": [datetime(2031, 1, 1)]}, "spec.one_off[0]"),
    ("negative max_runs", {"cron": "* * * * *", "max_runs": -1}, "spec.max_runs"),
    ("negative jitter", {"cron": "* * * * *", "jitter": timedelta(seconds=-1)}, "spec.jitter"),
    ("an unknown dst_gap", {"cron": "* * * * *", "dst_gap": "sideways"}, "spec.dst_gap"),
    ("an unknown dst_repeat", {"cron": "* * * * *", "dst_repeat": "thrice"}, "spec.dst_repeat"),
    ("an unknown overlap", {"cron": "* * * * *", "overlap": "sometimes"}, "policy.overlap"),
    ("an unknown catchup", {"cron": "* * * * *", "catchup": "most"}, "policy.catchup"),
    (
        "a negative catch-up window",
        {"cron": "* * * * *", "catchup_window": timedelta(minutes=-1)},
        "policy.catchup_window",
    ),
    (
        "a negative catch-up cap",
        {"cron": "* * * * *", "catchup_max_runs": -3},
        "policy.catchup_max_runs",
    ),
    ("a trace share over 1", {"cron": "* * * * *", "trace_sample": 1.5}, "policy.trace_sample"),
    ("a negative trace share", {"cron": "* * * * *", "trace_sample": -0.01}, "policy.trace_sample"),
]


@pytest.fixture
def client(store: StoreProcess) -> Iterator[Client]:
    with Client(store_addr=store.address, timeout=timedelta(seconds=10)) as c:
        yield c


@pytest.fixture
def job_type(store: StoreProcess) -> str:
    return register_job_type(store.stub())


def test_every_malformed_spec_names_the_field_and_stores_nothing(
    client: Client, job_type: str
) -> None:
    for what, args, field in CASES:
        schedule_id = fresh("bad")

        with pytest.raises(InvalidArgument) as info:
            client.create_schedule(schedule_id, job_type=job_type, **args)

        assert info.value.field == field, f"{what}: {info.value.message}"
        assert info.value.rule, what
        with pytest.raises(NotFound):
            client.get_schedule(schedule_id)
    assert client.list_schedules(include_deleted=True) == []


def test_an_unknown_id_or_job_type_is_refused_too(client: Client, job_type: str) -> None:
    with pytest.raises(InvalidArgument) as bad_id:
        client.create_schedule("Bad ID!", cron="* * * * *", job_type=job_type)
    assert bad_id.value.field == "schedule_id"
    with pytest.raises(InvalidArgument) as bad_job:
        client.create_schedule(fresh("s"), cron="* * * * *", job_type="no.such.job")
    assert bad_job.value.field == "job_type"
    assert client.list_schedules(include_deleted=True) == []


def test_an_enum_value_the_server_does_not_know_is_refused(store: StoreProcess) -> None:
    stub = store.stub()
    job = register_job_type(stub)
    spec = pb.ScheduleSpec(cron=["* * * * *"])
    spec.dst_gap = 42  # type: ignore[assignment]
    schedule = pb.Schedule(schedule_id=fresh("enum"), spec=spec, job_type=job)

    with pytest.raises(grpc.RpcError) as info:
        stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule), timeout=10)

    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("spec.dst_gap: ")
    listed = stub.ListSchedules(api.ListSchedulesRequest(include_deleted=True), timeout=10)
    assert list(listed.schedules) == []


@pytest.mark.parametrize("ratio", [1.01, -0.5, float("nan")])
def test_a_trace_share_out_of_range_is_refused_by_the_store_itself(
    store: StoreProcess, ratio: float
) -> None:
    # Given a schedule whose trace share is no share, sent as it is (not through the SDK)
    stub = store.stub()
    job = register_job_type(stub)
    policy = pb.SchedulePolicy(trace_sample=ratio)
    spec = pb.ScheduleSpec(cron=["* * * * *"])
    schedule = pb.Schedule(schedule_id=fresh("share"), spec=spec, policy=policy, job_type=job)

    # When it is created
    with pytest.raises(grpc.RpcError) as info:
        stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule), timeout=10)

    # Then it is refused naming the field and the rule, and nothing is stored
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("policy.trace_sample: "), info.value.details()
    assert "0 <= ratio <= 1" in info.value.details()
    listed = stub.ListSchedules(api.ListSchedulesRequest(include_deleted=True), timeout=10)
    assert [s.schedule_id for s in listed.schedules] == []
