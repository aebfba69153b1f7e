"""A workflow-store started with its limits set (``CRONWAVE_MAX_*``) applies them, and
a refusal names the configured limit."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as api

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
