"""Claims, heartbeats and completions over real gRPC: one writer per run at a time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import td_to_duration
from tests.harness.store import (
    FIRE,
    create_schedule,
    record_run,
    register_job_type,
    rpc_error,
)
from tests.helpers import claim_one, complete_one, eventually, get_one


def _claim(stub, run_id: str, worker: str) -> api.ClaimRunResponse:
    return claim_one(stub, api.ClaimRunRequest(run_id=run_id, worker_id=worker))


def _complete(stub, run_id: str, token: str, state=pb.RUN_STATE_SUCCEEDED, **kw):
    return complete_one(
        stub, api.CompleteRunRequest(run_id=run_id, attempt_token=token, state=state, **kw)
    )


def test_concurrent_claims_have_one_winner(stub):
    # Given a pending run and eight workers that claim it together
    run = record_run(stub, create_schedule(stub).schedule_id).run
    barrier = threading.Barrier(8)
    claims: list[api.ClaimRunResponse] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            claims.append(_claim(stub, run.run_id, f"w-{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    # Then exactly one claimed it, with attempt 1
    assert not errors, errors
    winners = [c for c in claims if c.claimed]
    assert len(claims) == 8 and len(winners) == 1
    winner = winners[0]
    assert len(winner.attempt_token) == 32  # 128 random bits
    got = get_one(stub, run.run_id)
    assert got.state == pb.RUN_STATE_WAITING and got.attempt == 1  # held, not begun
    assert got.worker_id == winner.run.worker_id
    assert got.claimed_at == got.heartbeat_at
    assert not got.HasField("started_at")  # no job body has begun
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [e.kind for e in events] == ["recorded", "enqueued", "claimed"]
    assert all(c.attempt_token == "" for c in claims if not c.claimed)
    # and no read returns the token
    assert winner.attempt_token not in str(got)


def test_zombie_attempt_is_refused_after_takeover(stub):
    # Given a run claimed by w1 of a job type with a short heartbeat timeout
    job = register_job_type(stub, heartbeat_timeout=timedelta(milliseconds=500))
    run = record_run(stub, create_schedule(stub, job).schedule_id).run
    first = _claim(stub, run.run_id, "w1")
    assert first.claimed
    # A live attempt keeps the run
    assert not _claim(stub, run.run_id, "w2").claimed
    hb = stub.Heartbeat(
        api.HeartbeatRequest(
            run_id=run.run_id, attempt_token=first.attempt_token, checkpoint_json='{"n": 1}'
        )
    )
    assert abs(hb.deadline.ToDatetime(tzinfo=UTC) - datetime.now(UTC)) < timedelta(seconds=5)

    # When w1 stops heartbeating and w2 takes over
    second = eventually(lambda: _claim(stub, run.run_id, "w2").claimed and True, timeout=10)
    assert second
    current = get_one(stub, run.run_id)
    assert current.attempt == 2 and current.worker_id == "w2"
    assert current.checkpoint_json == '{"n": 1}'  # the next attempt resumes from it
    assert current.claimed_at.ToDatetime() > first.run.claimed_at.ToDatetime()  # claimed anew

    # Then w1's heartbeat and completion are refused as a stale attempt
    stale_hb = rpc_error(
        stub.Heartbeat, api.HeartbeatRequest(run_id=run.run_id, attempt_token=first.attempt_token)
    )
    stale_done = rpc_error(_complete, stub, run.run_id, first.attempt_token)
    for err in (stale_hb, stale_done):
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert err.details().startswith("attempt_token: not the current attempt of run")
        assert "superseded by a newer attempt: the run is waiting, on attempt 2" in err.details()
        assert first.attempt_token not in err.details()
    after = get_one(stub, run.run_id)
    assert after.state == pb.RUN_STATE_WAITING and after.worker_id == "w2"
    kinds = [e.kind for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events]
    assert kinds == ["recorded", "enqueued", "claimed", "claimed"]


def test_a_wrong_token_is_not_called_superseded_when_no_newer_attempt_exists(stub):
    # Given a run on its first attempt, and a run never claimed
    schedule_id = create_schedule(stub).schedule_id
    claimed = record_run(stub, schedule_id).run
    claim = _claim(stub, claimed.run_id, "w1")
    assert claim.claimed
    never = record_run(stub, schedule_id, fire=FIRE + timedelta(minutes=1)).run
    wrong = "0" * 32

    # When a heartbeat, a completion and a hand-back come with a token not the run's
    refusals = [
        rpc_error(stub.Heartbeat, api.HeartbeatRequest(run_id=claimed.run_id, attempt_token=wrong)),
        rpc_error(_complete, stub, claimed.run_id, wrong),
        rpc_error(
            stub.ReleaseRun, api.ReleaseRunRequest(run_id=claimed.run_id, attempt_token=wrong)
        ),
    ]
    unclaimed = rpc_error(_complete, stub, never.run_id, wrong)

    # Then each is refused as not the current attempt's token, never as superseded
    for err in refusals:
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert err.details() == (
            f"attempt_token: not the current attempt of run '{claimed.run_id}': the token is "
            "not the run's current attempt token, and no newer attempt exists (the run is "
            "waiting, on its first attempt); use the attempt_token its claim returned, or "
            "stop working on the run"
        )
    assert unclaimed.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert unclaimed.details() == (
        f"attempt_token: not the current attempt of run '{never.run_id}': the run (pending) "
        "has never been claimed, so no attempt token is valid yet; claim it first"
    )
    # And the run's own attempt still holds it
    assert _complete(stub, claimed.run_id, claim.attempt_token).changed


def test_repeated_completion_changes_nothing(stub):
    # Given a run completed by its attempt
    run = record_run(stub, create_schedule(stub).schedule_id).run
    claim = _claim(stub, run.run_id, "w1")
    done = _complete(stub, run.run_id, claim.attempt_token, result_json='{"invoices": 3}')
    assert done.changed and done.run.state == pb.RUN_STATE_SUCCEEDED
    assert done.run.finished_at.seconds > 0
    # (the answer carries no result: the run as read holds it)
    assert done.run.result_json == "" and get_one(stub, run.run_id).result_json == (
        '{"invoices": 3}'
    )
    events_before = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events

    # When it is completed again, differently, and claimed again
    again = _complete(stub, run.run_id, claim.attempt_token, pb.RUN_STATE_FAILED, error="boom")
    stale = _complete(stub, run.run_id, "9" * 32, pb.RUN_STATE_CANCELLED)
    reclaim = _claim(stub, run.run_id, "w2")

    # Then nothing changed
    assert not again.changed and not stale.changed
    assert again.run == done.run == stale.run
    full = get_one(stub, run.run_id)  # with the blobs a completion's answer leaves out
    assert not reclaim.claimed and reclaim.run == full
    full.ClearField("payload_json")
    full.ClearField("result_json")
    assert full == done.run
    events_after = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert events_after == events_before
    # And a heartbeat after the end is refused
    err = rpc_error(
        stub.Heartbeat, api.HeartbeatRequest(run_id=run.run_id, attempt_token=claim.attempt_token)
    )
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "run is already succeeded" in err.details()


def test_completion_states(stub):
    sid = create_schedule(stub).schedule_id
    base = datetime(2031, 5, 1, tzinfo=UTC)
    for i, (state, kind) in enumerate(
        [
            (pb.RUN_STATE_FAILED, "failed"),
            (pb.RUN_STATE_TIMED_OUT, "timed_out"),
            (pb.RUN_STATE_CANCELLED, "cancelled"),
        ]
    ):
        run = record_run(stub, sid, base + timedelta(minutes=i)).run
        token = _claim(stub, run.run_id, "w").attempt_token
        done = _complete(stub, run.run_id, token, state, error="why")
        assert done.changed and done.run.state == state and done.run.error == "why"
        events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
        assert (events[-1].kind, events[-1].detail) == (kind, "why")

    run = record_run(stub, sid, base + timedelta(hours=1)).run
    for bad in (pb.RUN_STATE_UNSPECIFIED, pb.RUN_STATE_PENDING, pb.RUN_STATE_MISSED):
        err = rpc_error(_complete, stub, run.run_id, "0" * 32, bad)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details().startswith("completions[0].state: ")
    # A completion needs the token of the run's claim
    err = rpc_error(_complete, stub, run.run_id, "", pb.RUN_STATE_CANCELLED)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("completions[0].attempt_token: must be the 32 hex digits")
    # A run nobody picked up is cancelled with CancelRun
    cancelled = stub.CancelRun(api.CancelRunRequest(run_id=run.run_id, reason="not needed"))
    assert cancelled.changed and cancelled.run.state == pb.RUN_STATE_CANCELLED
    assert cancelled.run.error == "not needed"
    again = stub.CancelRun(api.CancelRunRequest(run_id=run.run_id, reason="twice"))
    assert not again.changed and again.run.error == "not needed"


def test_failed_with_retry_goes_back_to_pending(stub):
    # Given a claimed run
    run = record_run(stub, create_schedule(stub).schedule_id).run
    first = _claim(stub, run.run_id, "w1")

    # When the attempt fails with a retry delay
    done = _complete(
        stub,
        run.run_id,
        first.attempt_token,
        pb.RUN_STATE_FAILED,
        error="card network down",
        retry_after=td_to_duration(timedelta(seconds=1)),
    )

    # Then the run is pending again, the event says when, and the next claim is attempt 2
    assert done.changed and done.run.state == pb.RUN_STATE_PENDING
    assert done.run.error == "card network down" and not done.run.HasField("finished_at")
    last = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events[-1]
    assert last.kind == "retry_scheduled" and "retry_after=1s" in last.detail
    rpc_err = rpc_error(
        stub.Heartbeat, api.HeartbeatRequest(run_id=run.run_id, attempt_token=first.attempt_token)
    )
    assert rpc_err.code() == grpc.StatusCode.FAILED_PRECONDITION
    # a claim before the retry delay has passed is refused; one after it wins
    assert not _claim(stub, run.run_id, "w2").claimed
    second = eventually(
        lambda: (claim := _claim(stub, run.run_id, "w2")).claimed and claim,
        what="a claim after the delay",
    )
    assert second.claimed and second.attempt_token != first.attempt_token
    assert second.run.attempt == 2
    assert rpc_error(_complete, stub, run.run_id, first.attempt_token).code() == (
        grpc.StatusCode.FAILED_PRECONDITION
    )
    assert _complete(stub, run.run_id, second.attempt_token).run.state == pb.RUN_STATE_SUCCEEDED


def test_heartbeat_stores_checkpoint_and_returns_deadline(stub):
    job = register_job_type(stub, heartbeat_timeout=timedelta(seconds=42))
    run = record_run(stub, create_schedule(stub, job).schedule_id).run
    token = _claim(stub, run.run_id, "w1").attempt_token

    before = datetime.now(UTC)
    hb = stub.Heartbeat(
        api.HeartbeatRequest(run_id=run.run_id, attempt_token=token, checkpoint_json='{"i": 9}')
    )
    stub.Heartbeat(api.HeartbeatRequest(run_id=run.run_id, attempt_token=token))

    deadline = hb.deadline.ToDatetime(tzinfo=UTC)
    assert before + timedelta(seconds=41) < deadline < datetime.now(UTC) + timedelta(seconds=43)
    got = get_one(stub, run.run_id)
    assert got.checkpoint_json == '{"i": 9}'  # an empty checkpoint keeps the last one
    assert got.heartbeat_at.ToDatetime() > got.claimed_at.ToDatetime()
    # A pending run has no attempt to heartbeat
    pending = record_run(stub, run.schedule_id, datetime(2032, 1, 1, tzinfo=UTC)).run
    err = rpc_error(
        stub.Heartbeat, api.HeartbeatRequest(run_id=pending.run_id, attempt_token="0" * 32)
    )
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_attempt_tokens_cannot_be_guessed_or_read(stub):
    # Given a run claimed by its worker, and everything a reader can learn about it
    run = record_run(stub, create_schedule(stub).schedule_id).run
    claim = _claim(stub, run.run_id, "w1")
    reads = [
        stub.GetRuns(api.GetRunsRequest(runs=[api.GetRunRequest(run_id=run.run_id)])),
        stub.ListRuns(api.ListRunsRequest(schedule_id=run.schedule_id)),
        stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)),
    ]
    (current,) = reads[0].runs

    # Then no read carries the attempt's token
    for reply in reads:
        assert claim.attempt_token not in str(reply)
        assert claim.attempt_token.encode() not in reply.SerializeToString()
    # And a completion forged from what a read returns is refused, leaving the run alone
    guesses = [str(current.attempt), f"{current.attempt:032x}", "0" * 32, current.run_id]
    for guess in guesses:
        err = rpc_error(_complete, stub, run.run_id, guess)
        assert err.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT)
        assert claim.attempt_token not in err.details()
    assert get_one(stub, run.run_id).state == pb.RUN_STATE_WAITING
    # And the real attempt still completes it
    done = _complete(stub, run.run_id, claim.attempt_token)
    assert done.changed and done.run.state == pb.RUN_STATE_SUCCEEDED


def test_release_hands_the_run_back_for_an_immediate_claim(stub):
    # Given a run claimed by w1, which saved a checkpoint
    run = record_run(stub, create_schedule(stub).schedule_id).run
    first = _claim(stub, run.run_id, "w1")

    # When w1 stops gracefully and releases it
    released = stub.ReleaseRun(
        api.ReleaseRunRequest(
            run_id=run.run_id,
            attempt_token=first.attempt_token,
            checkpoint_json='{"done": 40}',
            reason="worker_shutdown",
        )
    )

    # Then the run is pending with its checkpoint, and w2 claims it at once
    assert released.released and released.run.state == pb.RUN_STATE_PENDING
    second = _claim(stub, run.run_id, "w2")
    assert second.claimed and second.run.attempt == 2
    assert second.run.checkpoint_json == '{"done": 40}'
    # And w1's token is void: its late completion is refused
    assert rpc_error(_complete, stub, run.run_id, first.attempt_token).code() == (
        grpc.StatusCode.FAILED_PRECONDITION
    )
    kinds = [e.kind for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events]
    assert kinds == ["recorded", "enqueued", "claimed", "released", "claimed"]
