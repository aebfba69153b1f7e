"""What the store wrote survives a kill -9 of its process."""

from __future__ import annotations

from datetime import UTC, datetime

from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from tests.harness.store import create_schedule, record_run
from tests.helpers import claim_one, complete_one, get_one


def test_schedules_and_runs_survive_kill_9(store):
    # Given a schedule, a claimed run with a microsecond fire time, and a fencing token
    stub = store.stub()
    schedule = create_schedule(stub)
    fire = datetime(2030, 3, 30, 23, 59, 59, 123456, tzinfo=UTC)
    run = record_run(stub, schedule.schedule_id, fire, token=7).run
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events

    # When the store is killed without warning and started again
    store.kill9()
    store.start()
    stub = store.stub()

    # Then everything is still there, exactly
    assert stub.GetSchedule(api.GetScheduleRequest(schedule_id=schedule.schedule_id)).schedule == (
        schedule
    )
    got = get_one(stub, run.run_id)
    assert got == claim.run
    assert got.fire_time == dt_to_ts(fire) and got.state == pb.RUN_STATE_WAITING
    assert stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events == events
    assert stub.GetFencingToken(api.GetFencingTokenRequest()).fencing_token == 7
    # And the fire is still recorded once
    again = record_run(stub, schedule.schedule_id, fire, token=7)
    assert not again.created and again.run.run_id == run.run_id
    # And the attempt token still fences the claimed attempt
    done = complete_one(
        stub,
        api.CompleteRunRequest(
            run_id=run.run_id, attempt_token=claim.attempt_token, state=pb.RUN_STATE_SUCCEEDED
        ),
    )
    assert done.changed
