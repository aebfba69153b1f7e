"""CancelRun over real gRPC: at once, or with a grace the running attempt learns from
its heartbeat; whatever the attempt reports afterwards ends the run CANCELLED."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import td_to_duration
from tests.harness.store import (
    claimed_run,
    create_schedule,
    record_run,
    rpc_error,
)
from tests.helpers import claim_one, complete_one, eventually, get_one

pytestmark = pytest.mark.both_backends


def _cancel(stub, run_id: str, grace: timedelta = timedelta(0), reason: str = "operator"):
    return stub.CancelRun(
        api.CancelRunRequest(run_id=run_id, reason=reason, grace=td_to_duration(grace))
    )


def _kinds(stub, run_id: str) -> list[str]:
    return [e.kind for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run_id)).events]


def test_a_grace_marks_a_running_run_and_its_heartbeat_carries_the_cancel(stub):
    # Given a running run (claimed, its body begun)
    run, token = claimed_run(stub)
    started = api.HeartbeatRequest(run_id=run.run_id, attempt_token=token)
    started.body_started_at.FromDatetime(datetime.now(UTC))
    stub.Heartbeat(started)

    # When it is cancelled with a 30 s grace
    answer = _cancel(stub, run.run_id, timedelta(seconds=30), reason="not needed tonight")

    # Then it is still RUNNING, cancel-requested, with a deadline about 30 s away
    assert answer.changed and answer.run.state == pb.RUN_STATE_RUNNING
    deadline = answer.run.cancel_deadline.ToDatetime(tzinfo=UTC)
    assert timedelta(seconds=25) < deadline - datetime.now(UTC) <= timedelta(seconds=30)
    assert answer.run.cancel_reason == "not needed tonight"
    assert _kinds(stub, run.run_id)[-1] == "cancel_requested"
    # and the attempt's heartbeat says so, with the grace left
    beat = stub.Heartbeat(api.HeartbeatRequest(run_id=run.run_id, attempt_token=token))
    assert beat.cancel_requested and beat.cancel_reason == "not needed tonight"
    assert timedelta(seconds=25) < beat.cancel_grace.ToTimedelta() <= timedelta(seconds=30)
    # A second cancel may bring the deadline closer, never move it away
    assert not _cancel(stub, run.run_id, timedelta(minutes=10)).changed
    closer = _cancel(stub, run.run_id, timedelta(seconds=5), reason="sooner")
    assert closer.changed and closer.run.cancel_deadline.ToDatetime(tzinfo=UTC) < deadline

    # No claim takes the run while it is being cancelled
    again = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w2"))
    assert not again.claimed


def test_a_success_reported_after_the_cancel_ends_the_run_cancelled_without_its_result(stub):
    # Given a running run whose cancel was requested with a grace
    run, token = claimed_run(stub)
    _cancel(stub, run.run_id, timedelta(seconds=30), reason="stop please")

    # When its job returns normally and the worker reports a success with a result
    done = complete_one(
        stub,
        api.CompleteRunRequest(
            run_id=run.run_id,
            attempt_token=token,
            state=pb.RUN_STATE_SUCCEEDED,
            result_json='{"charged": 100}',
        ),
    )

    # Then the run is CANCELLED with the cancel's reason, and the result is not kept
    assert done.changed and done.run.state == pb.RUN_STATE_CANCELLED
    got = get_one(stub, run.run_id)
    assert (got.state, got.error, got.result_json) == (pb.RUN_STATE_CANCELLED, "stop please", "")
    assert _kinds(stub, run.run_id)[-2:] == ["cancel_requested", "cancelled"]
    # and nothing the attempt reports afterwards changes it
    late = rpc_error(
        stub.Heartbeat,
        api.HeartbeatRequest(run_id=run.run_id, attempt_token=token, checkpoint_json='{"a": 1}'),
    )
    assert late.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert get_one(stub, run.run_id).checkpoint_json == got.checkpoint_json


def test_a_retry_or_a_hand_back_of_a_cancelled_run_ends_it_instead(stub):
    # Given two running runs being cancelled with a grace
    failing, failing_token = claimed_run(stub)
    handed, handed_token = claimed_run(stub)
    for run in (failing, handed):
        _cancel(stub, run.run_id, timedelta(seconds=30), reason="cancel")

    # When one attempt fails asking for a retry and the other's worker hands it back
    retried = complete_one(
        stub,
        api.CompleteRunRequest(
            run_id=failing.run_id,
            attempt_token=failing_token,
            state=pb.RUN_STATE_FAILED,
            error="boom",
            retry_after=td_to_duration(timedelta(seconds=1)),
        ),
    )
    released = stub.ReleaseRun(
        api.ReleaseRunRequest(run_id=handed.run_id, attempt_token=handed_token, reason="shutdown")
    )

    # Then both end CANCELLED: no retry is scheduled and nothing is handed back
    assert retried.run.state == pb.RUN_STATE_CANCELLED
    assert not released.released and released.run.state == pb.RUN_STATE_CANCELLED
    assert "retry_scheduled" not in _kinds(stub, failing.run_id)
    assert "released" not in _kinds(stub, handed.run_id)


def test_a_cancelling_run_whose_worker_died_is_ended_by_the_sweeper_not_resent(stub):
    # Given a cancel-requested run whose attempt then stops heartbeating
    run, _token = claimed_run(stub, heartbeat_timeout=timedelta(milliseconds=500))
    _cancel(stub, run.run_id, timedelta(seconds=30), reason="cancel")

    # When the sweeper looks for stalled runs once the heartbeat has lapsed
    def swept() -> pb.Run:
        stalled = stub.RequeueStalledRuns(
            api.RequeueStalledRunsRequest(pending_for=td_to_duration(timedelta(seconds=1)))
        ).runs
        assert run.run_id not in [s.run.run_id for s in stalled]
        got = get_one(stub, run.run_id)
        assert got.state == pb.RUN_STATE_CANCELLED, pb.RunState.Name(got.state)
        return got

    ended = eventually(swept, timeout=20, what="the cancelling run ended by the sweeper")

    # Then it is CANCELLED with the reason and was never re-queued
    assert ended.error == "cancel"
    assert "requeued" not in _kinds(stub, run.run_id)


def test_a_run_no_worker_holds_is_cancelled_at_once_and_never_claimed(stub):
    # Given a run recorded but not claimed
    run = record_run(stub, create_schedule(stub).schedule_id).run

    # When it is cancelled, even with a grace
    answer = _cancel(stub, run.run_id, timedelta(seconds=30), reason="not needed")

    # Then it is CANCELLED at once, and its message's claim is refused
    assert answer.changed and answer.run.state == pb.RUN_STATE_CANCELLED
    assert answer.run.error == "not needed"
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    assert not claim.claimed and claim.run.state == pb.RUN_STATE_CANCELLED
    assert "claimed" not in _kinds(stub, run.run_id)


def test_a_finished_run_is_returned_unchanged_and_an_unknown_one_is_not_found(stub):
    # Given a run that succeeded
    run, token = claimed_run(stub)
    done = complete_one(
        stub,
        api.CompleteRunRequest(
            run_id=run.run_id, attempt_token=token, state=pb.RUN_STATE_SUCCEEDED
        ),
    )

    # When it is cancelled
    answer = _cancel(stub, run.run_id, timedelta(seconds=30))

    # Then nothing changes
    assert not answer.changed and answer.run == get_one(stub, run.run_id)
    assert answer.run.state == pb.RUN_STATE_SUCCEEDED
    assert answer.run.finished_at == done.run.finished_at
    # and a run the store does not have is NOT_FOUND
    err = rpc_error(_cancel, stub, "run-that-does-not-exist")
    assert err.code() == grpc.StatusCode.NOT_FOUND
    assert "run-that-does-not-exist" in err.details()


@pytest.mark.parametrize(
    ("grace", "rule"),
    [
        (timedelta(seconds=-1), "grace: must not be negative"),
        (timedelta(hours=2), "grace: must be at most 1h"),
    ],
)
def test_a_bad_grace_is_refused_naming_the_field_and_nothing_changes(stub, grace, rule):
    # Given a running run
    run, _token = claimed_run(stub)
    before = _kinds(stub, run.run_id)

    # When a cancel gives a grace outside 0 .. 1 h
    err = rpc_error(_cancel, stub, run.run_id, grace)

    # Then it is INVALID_ARGUMENT naming the field and the rule, and the run is untouched
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith(rule), err.details()
    got = get_one(stub, run.run_id)
    assert got.state == pb.RUN_STATE_WAITING and not got.HasField("cancel_deadline")
    assert _kinds(stub, run.run_id) == before


def test_a_heartbeat_with_the_body_start_records_started_once(stub):
    # Given a claimed run: claimed, but no body has begun (WAITING)
    run, token = claimed_run(stub)
    assert run.HasField("claimed_at") and not run.HasField("started_at")
    assert run.state == pb.RUN_STATE_WAITING

    # When the heartbeat reports the body's start
    body = datetime.now(UTC)
    request = api.HeartbeatRequest(run_id=run.run_id, attempt_token=token)
    request.body_started_at.FromDatetime(body)
    stub.Heartbeat(request)

    # Then the run is RUNNING, has started_at and the event "started"
    got = get_one(stub, run.run_id)
    assert got.state == pb.RUN_STATE_RUNNING
    assert got.started_at.ToDatetime(tzinfo=UTC) == body
    assert got.claimed_at.ToDatetime(tzinfo=UTC) <= got.started_at.ToDatetime(tzinfo=UTC)
    assert _kinds(stub, run.run_id).count("started") == 1
