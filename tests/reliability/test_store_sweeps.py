"""The store's side of the sweeper and the dead-letter list, over gRPC: which runs
need a new message, how often they are handed out, and dead-lettering and replaying."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import grpc

from cronwave.v1 import common_pb2 as pb
from cronwave.v1 import workflow_store_service_pb2 as api
from cronwave_core.convert import td_to_duration
from tests.helpers import eventually
from tests.workflow_store.support import (
    StoreProcess,
    create_schedule,
    record_run,
    register_job_type,
    rpc_error,
)

PAST = datetime.now(UTC) - timedelta(minutes=5)


def sweep(stub, pending_for: float, limit: int = 100) -> dict[str, str]:
    response = stub.RequeueStalledRuns(
        api.RequeueStalledRunsRequest(
            pending_for=td_to_duration(timedelta(seconds=pending_for)), limit=limit
        )
    )
    return {s.run.run_id: s.reason for s in response.runs}


def test_an_unclaimed_run_is_handed_out_once_overdue_then_with_growing_waits(
    store: StoreProcess,
) -> None:
    stub = store.stub()
    run = record_run(stub, create_schedule(stub).schedule_id, fire=PAST).run
    # Not yet: it was recorded (its message sent) just now
    assert run.run_id not in sweep(stub, pending_for=0.5)
    # Overdue: handed out once, with a "requeued" event
    assert eventually(lambda: sweep(stub, 0.5).get(run.run_id), what="overdue") == "not_picked_up"
    assert run.run_id not in sweep(stub, 0.5)
    # then again only after the bound, and the next time after twice that
    eventually(lambda: run.run_id in sweep(stub, 0.5), timeout=5, interval=0.02)
    eventually(lambda: run.run_id in sweep(stub, 0.5), timeout=5, interval=0.02)
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [e.kind for e in events] == ["recorded", "requeued", "requeued", "requeued"]
    # (the bound is at least 1 s between re-sends, as the store's own clock recorded them)
    first, second, third = (e.at.ToDatetime() for e in events[1:])
    assert (second - first).total_seconds() >= 1.0
    assert (third - second).total_seconds() >= 2.0
    # and a claim ends it: a claimed run is not handed out while it beats
    assert stub.ClaimRun(api.ClaimRunRequest(run_id=run.run_id, worker_id="w1")).claimed
    time.sleep(1.1)
    assert run.run_id not in sweep(stub, 0.5)


def test_a_run_whose_heartbeat_lapsed_is_handed_out_once_per_lapse(store: StoreProcess) -> None:
    stub = store.stub()
    job = register_job_type(stub, heartbeat_timeout=timedelta(seconds=1))
    run = record_run(stub, create_schedule(stub, job).schedule_id, fire=PAST).run
    claim = stub.ClaimRun(api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    # While it beats it is alive
    for _ in range(3):
        stub.Heartbeat(api.HeartbeatRequest(run_id=run.run_id, attempt_token=claim.attempt_token))
        assert run.run_id not in sweep(stub, 30)
        time.sleep(0.4)
    # Once its heartbeat is older than the job type's timeout, it is handed out, once
    reason = eventually(lambda: sweep(stub, 30).get(run.run_id), timeout=5, what="lapsed")
    assert reason == "heartbeat_lapsed"
    assert run.run_id not in sweep(stub, 30)
    # the new attempt takes it over; when that one dies too, it is handed out again
    again = stub.ClaimRun(api.ClaimRunRequest(run_id=run.run_id, worker_id="w2"))
    assert again.claimed and again.attempt_token != claim.attempt_token
    assert again.run.attempt == claim.run.attempt + 1
    reason = eventually(lambda: sweep(stub, 30).get(run.run_id), timeout=5, what="lapsed again")
    assert reason == "heartbeat_lapsed"


def test_dead_letter_list_and_replay(store: StoreProcess) -> None:
    stub = store.stub()
    run = record_run(stub, create_schedule(stub).schedule_id, fire=PAST).run
    claim = stub.ClaimRun(api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    # A superseded attempt cannot dead-letter the run
    stale = rpc_error(
        stub.DeadLetterRun,
        api.DeadLetterRunRequest(
            run_id=run.run_id, attempt_token="f" * 32, reason="retries_exhausted"
        ),
    )
    assert stale.code() == grpc.StatusCode.FAILED_PRECONDITION
    # An unknown reason is refused, naming the field
    bad = rpc_error(
        stub.DeadLetterRun,
        api.DeadLetterRunRequest(run_id=run.run_id, attempt_token="1" * 32, reason="bored"),
    )
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT and bad.details().startswith("reason:")
    # The attempt that gives up dead-letters it with its error
    done = stub.DeadLetterRun(
        api.DeadLetterRunRequest(
            run_id=run.run_id,
            attempt_token=claim.attempt_token,
            reason="retries_exhausted",
            error="Flaky: no",
        )
    )
    assert done.changed and done.run.state == pb.RUN_STATE_DEAD_LETTERED
    assert (done.dead_letter.reason, done.dead_letter.error) == ("retries_exhausted", "Flaky: no")
    # twice changes nothing
    assert not stub.DeadLetterRun(
        api.DeadLetterRunRequest(
            run_id=run.run_id, attempt_token=claim.attempt_token, reason="retries_exhausted"
        )
    ).changed
    # A poison message naming no known run is listed on its own
    poison = stub.DeadLetterRun(
        api.DeadLetterRunRequest(reason="undecodable", error="v: missing", message_json="{}")
    )
    assert poison.changed and not poison.HasField("run")
    letters = stub.ListDeadLetters(api.ListDeadLettersRequest()).dead_letters
    assert [d.reason for d in letters[:2]] == ["undecodable", "retries_exhausted"]
    # Replay: PENDING, handed to the sweeper at once, off the list
    replayed = stub.ReplayDeadLetter(api.ReplayDeadLetterRequest(run_id=run.run_id)).run
    assert replayed.state == pb.RUN_STATE_PENDING and not replayed.HasField("finished_at")
    assert sweep(stub, 30).get(run.run_id) == "replayed"
    assert run.run_id not in [
        d.run_id for d in stub.ListDeadLetters(api.ListDeadLettersRequest()).dead_letters
    ]
    again = stub.ClaimRun(api.ClaimRunRequest(run_id=run.run_id, worker_id="w2"))
    assert again.claimed and again.run.attempt == claim.run.attempt + 1
    # and only a dead-lettered run can be replayed
    refused = rpc_error(stub.ReplayDeadLetter, api.ReplayDeadLetterRequest(run_id=run.run_id))
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "is not dead-lettered" in refused.details()
