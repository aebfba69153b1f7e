"""A claim's answer carries the instant by which the claimed run must have succeeded
(``workflow_store.claim_deadlines``): for a run a planner fired whose schedule has a
deadline and whose trace is not sampled, the one case a worker needs it for."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts, td_to_duration, ts_to_dt
from cronwave_core.security.identity import ON_BEHALF_OF
from cronwave_core.telemetry.run_span import decide_run_trace_id
from tests.harness.store import FIRE, MANUAL_BY, register_job_type, schedule_msg
from tests.helpers import claim_one, fresh, record_one

pytestmark = pytest.mark.both_backends

DEADLINE = timedelta(minutes=45)


def _schedule(stub, deadline: timedelta | None) -> str:
    schedule = schedule_msg(fresh("deadline"), register_job_type(stub))
    if deadline is not None:
        schedule.policy.deadline.CopyFrom(td_to_duration(deadline))
    stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule))
    return schedule.schedule_id


def _claimed(
    stub, schedule_id: str, fire: datetime, *, sampled: bool, trigger: int = 0
) -> api.ClaimRunResponse:
    trace_id = decide_run_trace_id(time.time_ns(), 1.0 if sampled else 0.0)
    manual = trigger == pb.TRIGGER_KIND_MANUAL
    run = record_one(
        stub,
        api.RecordRunRequest(
            schedule_id=schedule_id,
            fire_time=dt_to_ts(fire),
            trigger=trigger or pb.TRIGGER_KIND_SCHEDULED,
            fencing_token=0 if manual else 1,
            trace_id=format(trace_id, "032x"),
            enqueue=True,
        ),
        metadata=[(ON_BEHALF_OF, MANUAL_BY)] if manual else [],
    ).run
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    assert claim.claimed
    return claim


def test_a_run_not_sampled_is_claimed_with_its_fire_time_plus_its_deadline(stub):
    schedule_id = _schedule(stub, DEADLINE)

    claim = _claimed(stub, schedule_id, FIRE, sampled=False)

    assert claim.HasField("deadline_at")
    assert ts_to_dt(claim.deadline_at) == FIRE + DEADLINE


def test_no_deadline_is_answered_where_no_worker_needs_one(stub):
    with_deadline = _schedule(stub, DEADLINE)
    without = _schedule(stub, None)

    sampled = _claimed(stub, with_deadline, FIRE, sampled=True)
    no_deadline = _claimed(stub, without, FIRE, sampled=False)
    manual = _claimed(
        stub, with_deadline, FIRE + timedelta(days=1), sampled=False,
        trigger=pb.TRIGGER_KIND_MANUAL,
    )  # fmt: skip

    assert not sampled.HasField("deadline_at")
    assert not no_deadline.HasField("deadline_at")
    assert not manual.HasField("deadline_at")
