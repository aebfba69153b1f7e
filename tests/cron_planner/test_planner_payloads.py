"""A planner process loads and fires large schedules, and leaves out only the records it
cannot plan: many payloads near the limit, and rows planted in the database past it."""

from __future__ import annotations

import json
import re

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.suite import Suite
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh, plant_schedule_row

pytestmark = pytest.mark.slow

LEASE_ENV = {
    "CRONWAVE_LEASE_TTL": "3",
    "CRONWAVE_LEASE_RENEW_INTERVAL": "0.5",
    "CRONWAVE_LEASE_RETRY_INTERVAL": "0.2",
}
KIB = 1024
MIB = 1024 * KIB


def store(suite: Suite) -> store_grpc.WorkflowStoreServiceStub:
    return store_grpc.WorkflowStoreServiceStub(hop_channel(suite, "workflow-store"))


def status(suite: Suite) -> planner_pb.GetPlannerStatusResponse:
    stub = planner_grpc.CronPlannerServiceStub(hop_channel(suite, "cron-planner"))
    return stub.GetPlannerStatus(planner_pb.GetPlannerStatusRequest(), timeout=5)


def payload_of(size: int, **extra: object) -> str:
    """A JSON object of exactly ``size`` bytes."""
    head = json.dumps({**extra, "blob": ""})
    return head[:-2] + "x" * (size - len(head)) + head[-2:]


def job_type(s: store_grpc.WorkflowStoreServiceStub) -> str:
    name = fresh("job")
    job = common_pb2.JobType(name=name)
    job.duration_limit.FromSeconds(60)
    s.RegisterJobType(store_pb.RegisterJobTypeRequest(job_type=job), timeout=10)
    return name


def every_three_seconds(
    s: store_grpc.WorkflowStoreServiceStub, schedule_id: str, job: str, payload: str = "{}"
) -> str:
    spec = common_pb2.ScheduleSpec()
    spec.intervals.add().every.FromSeconds(3)
    schedule = common_pb2.Schedule(
        schedule_id=schedule_id, spec=spec, job_type=job, payload_json=payload
    )
    s.CreateSchedule(store_pb.CreateScheduleRequest(schedule=schedule), timeout=30)
    return schedule_id


def fired(s: store_grpc.WorkflowStoreServiceStub, schedule_id: str) -> bool:
    """The schedule has a run (asked one at a time: a run carries its payload)."""
    request = store_pb.ListRunsRequest(schedule_id=schedule_id, limit=1)
    return len(s.ListRuns(request, timeout=10).runs) == 1


def succeeded(s: store_grpc.WorkflowStoreServiceStub, schedule_id: str) -> bool:
    request = store_pb.ListRunsRequest(
        schedule_id=schedule_id, limit=1, states=[common_pb2.RUN_STATE_SUCCEEDED]
    )
    return len(s.ListRuns(request, timeout=10).runs) == 1


def stop_planner(suite: Suite) -> None:
    suite.stop_proc(suite.procs["cron-planner"])


def planner_log(suite: Suite) -> str:
    return (suite.log_dir / "cron-planner.log").read_text(errors="replace")


def plant(suite: Suite, schedule_id: str, *, as_change: bool = False, **columns: object) -> None:
    assert suite.config.database_url is not None
    plant_schedule_row(suite.config.database_url, schedule_id, as_change=as_change, **columns)


def test_a_restarted_planner_loads_and_fires_thirty_payloads_near_the_limit(
    make_suite: SuiteFactory,
) -> None:
    # Given 30 schedules of the worker's noop job with 250 KiB payloads, due at the
    # same instants, created while no planner runs: 7.5 MB, over gRPC's 4 MiB message
    # limit in one page of the feed's 2,000 (and in one batch of their 30 runs)
    suite = make_suite(env=LEASE_ENV)
    s = store(suite)
    stop_planner(suite)
    job = "cronwave.noop"
    ids = [
        every_three_seconds(s, f"big-{i:02d}-{fresh('s')}", job, payload_of(250 * KIB, i=i))
        for i in range(30)
    ]

    # When the planner starts again
    suite.restart("cron-planner")

    # Then it loads all of them, leaves none out, and every one fires and succeeds,
    # each start going through at its first attempt
    eventually(lambda: status(suite).schedules == 30, timeout=60, what="all 30 loaded")
    eventually(lambda: status(suite).leader, timeout=30, what="leading")
    eventually(lambda: all(succeeded(s, sid) for sid in ids), timeout=90, what="each ran")
    # (the restarted planner's log: the one before it may have seen its neighbours
    # start late on a loaded machine)
    log = planner_log(suite).rsplit("cron-planner listening on", 1)[-1]
    assert "loaded 30 schedules at revision" in log and "(0 left out)" in log
    assert "failed (" not in log, log[-3000:]


def test_records_the_planner_cannot_plan_are_left_out_and_the_others_fire(
    make_suite: SuiteFactory,
) -> None:
    # Given three good schedules, and three rows changed straight in the database: a
    # 5 MiB payload, a 300 KiB one (over the limit, under the message limit), and a
    # calendar the planner rejects
    suite = make_suite(env=LEASE_ENV)
    s = store(suite)
    stop_planner(suite)
    job = job_type(s)
    good = [every_three_seconds(s, fresh("good"), job) for _ in range(3)]
    huge, over, bad_cron = (every_three_seconds(s, fresh(n), job) for n in ("huge", "over", "cal"))
    marker = "secret-payload-text"
    plant(suite, huge, payload_json=payload_of(5 * MIB, **{marker: 1}))
    plant(suite, over, payload_json=payload_of(300 * KIB, **{marker: 2}))
    plant(suite, bad_cron, spec={"cron": ["61 * * * *"], "time_zone": "UTC"})

    # When the planner starts again
    suite.restart("cron-planner")

    # Then it loads the good ones, leads, and fires them
    eventually(lambda: status(suite).leader, timeout=60, what="leading")
    assert status(suite).schedules == 3
    eventually(lambda: all(fired(s, sid) for sid in good), timeout=60, what="good ones fired")

    # And each planted one is left out: logged with its id and why (sizes, never the
    # payload), and counted
    log = planner_log(suite)
    assert f"schedule '{huge}' cannot be planned and is left out" in log
    assert f"payload_json: {5 * MIB} bytes, over the limit of {256 * KIB}" in log
    assert f"payload_json: {300 * KIB} bytes, over the limit of {256 * KIB}" in log
    assert f"schedule '{over}' cannot be planned" in log
    assert re.search(rf"schedule '{bad_cron}' cannot be planned .*spec\.cron", log)
    assert "loaded 3 schedules at revision" in log and "(3 left out)" in log
    assert marker not in log
    assert not any(fired(s, sid) for sid in (huge, over, bad_cron))


def test_one_oversized_change_does_not_stop_the_planners_watch(make_suite: SuiteFactory) -> None:
    # Given a leading planner firing two schedules
    suite = make_suite(env=LEASE_ENV)
    s = store(suite)
    job = job_type(s)
    keep, spoilt = (
        every_three_seconds(s, fresh("keep"), job),
        every_three_seconds(s, fresh("spoilt"), job),
    )
    eventually(lambda: status(suite).schedules == 2, timeout=30, what="both loaded")

    # When one of them is changed straight in the database to a 5 MiB payload, under a
    # new revision (so the watch sends it on), and a new schedule comes after it
    plant(suite, spoilt, as_change=True, payload_json=payload_of(5 * MIB))
    later = every_three_seconds(s, fresh("later"), job)

    # Then the planner leaves the spoilt one out, and still hears of the new one over
    # the same watch, and fires it
    left_out = f"schedule '{spoilt}' cannot be planned and is left out"
    eventually(lambda: left_out in planner_log(suite), timeout=30, what="spoilt one left out")
    eventually(lambda: fired(s, later), timeout=30, what="the later schedule fired")
    assert status(suite).schedules == 2  # keep and later
    assert fired(s, keep)
    assert "schedule feed interrupted" not in planner_log(suite)
