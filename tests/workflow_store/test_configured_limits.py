"""A workflow-store started with its limits set (``CRONWAVE_MAX_*``) applies them, and
a refusal names the configured limit."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as api

import cronwave
from cronwave_core.limits import MIB
from tests.harness.store import StoreProcess, register_job_type, schedule_msg
from tests.helpers import fresh


def test_a_store_applies_the_limits_it_was_started_with(tmp_path: Path, database_url: str) -> None:
    # Given a store with a 2 KiB payload limit and pages of at most 10
    proc = StoreProcess(tmp_path / "store", database_url)
    proc.env.update(CRONWAVE_MAX_PAYLOAD_BYTES="2048", CRONWAVE_MAX_PAGE_SIZE="10")
    try:
        proc.start()
        stub = proc.stub()
        job = register_job_type(stub)
        schedule = schedule_msg(fresh("small"), job)
        schedule.payload_json = '{"a": "' + "x" * 2040 + '"}'  # 2,049 bytes

        # When a schedule one byte over it is created, and 11 schedules are asked for
        with pytest.raises(grpc.RpcError) as payload:
            stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule))
        with pytest.raises(grpc.RpcError) as page:
            stub.ListSchedules(api.ListSchedulesRequest(limit=11))

        # Then both are refused by the configured limits, and nothing was created
        assert payload.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert payload.value.details() == "schedule.payload_json: at most 2048 bytes, got 2049"
        assert page.value.details() == "limit: must be at most 10 per page, got 11; page on"
        assert list(stub.ListSchedules(api.ListSchedulesRequest(limit=10)).schedules) == []
    finally:
        proc.stop()


def test_the_sdk_names_the_field_of_a_10_mb_payload_and_the_sizes_past_the_cap(
    store: StoreProcess,
) -> None:
    # Given a client of a store with the default limits
    job = register_job_type(store.stub())
    with cronwave.Client(store_addr=store.address, timeout=timedelta(seconds=60)) as client:
        # When a schedule with a 10 MB payload is created, and one past the store's
        # 16 MiB receive cap
        with pytest.raises(cronwave.InvalidArgument) as ten_mb:
            client.create_schedule(
                fresh("ten"), cron="0 2 * * *", job_type=job, payload={"b": "x" * 10_000_000}
            )
        with pytest.raises(cronwave.CronwaveError) as past_cap:
            client.create_schedule(
                fresh("huge"), cron="0 2 * * *", job_type=job, payload={"b": "x" * 17 * MIB}
            )

    # Then the first is refused naming the field, the limit and the size, and the
    # second with both sizes and what to do
    assert str(ten_mb.value) == "schedule.payload_json: at most 262144 bytes, got 10000009"
    assert past_cap.value.status == "RESOURCE_EXHAUSTED"
    message = str(past_cap.value)
    assert "over the receiving side's limit of 16777216 bytes" in message, message
    assert "a payload is at most 256 KiB" in message
    assert store.alive()
