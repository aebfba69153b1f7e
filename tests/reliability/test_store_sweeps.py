"""The store's side of the sweeper and the dead-letter list, over gRPC: which runs
need a new message, how often they are handed out, and dead-lettering and replaying."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts, td_to_duration
from tests.harness.store import (
    StoreProcess,
    create_schedule,
    record_run,
    register_job_type,
    rpc_error,
)
from tests.helpers import claim_one, complete_one, eventually

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
    assert run.run_id not in sweep(stub, pending_for=30)
    # Overdue: handed out, with a "requeued" event
    assert eventually(lambda: sweep(stub, 0.5).get(run.run_id), what="overdue") == "not_picked_up"
    # then again only after the bound, and the next time after twice that
    eventually(lambda: run.run_id in sweep(stub, 0.5), timeout=20, interval=0.02)
    eventually(lambda: run.run_id in sweep(stub, 0.5), timeout=20, interval=0.02)
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [e.kind for e in events] == ["recorded", "enqueued", "requeued", "requeued", "requeued"]
    # (the bound is at least 1 s between re-sends, as the store's own clock recorded them)
    first, second, third = (e.at.ToDatetime() for e in events[2:])
    assert (second - first).total_seconds() >= 1.0
    assert (third - second).total_seconds() >= 2.0


def test_a_claimed_run_is_not_handed_out_though_a_later_unclaimed_one_is(
    store: StoreProcess,
) -> None:
    stub = store.stub()
    job = register_job_type(stub, heartbeat_timeout=timedelta(minutes=10))
    schedule_id = create_schedule(stub, job).schedule_id
    # Given a run that was claimed at once (of a job type whose heartbeats may be ten
    # minutes apart), and then another one, left unclaimed
    claimed = record_run(stub, schedule_id, fire=PAST).run
    assert claim_one(stub, api.ClaimRunRequest(run_id=claimed.run_id, worker_id="w1")).claimed
    later = record_run(stub, schedule_id, fire=PAST + timedelta(minutes=1)).run
    # When the sweeps hand out the later one, overdue
    handed_out: set[str] = set()

    def later_handed_out() -> bool:
        handed_out.update(sweep(stub, 0.5))
        return later.run_id in handed_out

    eventually(later_handed_out, timeout=20, interval=0.02, what="the unclaimed run handed out")
    # Then the claimed one, pending longer, was never handed out (its heartbeat is young)
    assert claimed.run_id not in handed_out


def test_a_run_whose_heartbeat_lapsed_is_handed_out_once_per_lapse(store: StoreProcess) -> None:
    stub = store.stub()
    job = register_job_type(stub, heartbeat_timeout=timedelta(seconds=3))
    run = record_run(stub, create_schedule(stub, job).schedule_id, fire=PAST).run
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    # and one claimed after it that never beats
    silent = record_run(stub, create_schedule(stub, job).schedule_id, fire=PAST).run
    assert claim_one(stub, api.ClaimRunRequest(run_id=silent.run_id, worker_id="w9")).claimed
    # While it beats it is alive: the silent one, claimed later, lapses first
    handed_out: dict[str, str] = {}

    def silent_lapsed() -> bool:
        stub.Heartbeat(api.HeartbeatRequest(run_id=run.run_id, attempt_token=claim.attempt_token))
        handed_out.update(sweep(stub, 30))
        return silent.run_id in handed_out

    eventually(silent_lapsed, timeout=20, interval=0.1, what="the silent run lapsed")
    assert handed_out == {silent.run_id: "heartbeat_lapsed"}
    # Once its heartbeat is older than the job type's timeout, it is handed out, once
    reason = eventually(lambda: sweep(stub, 30).get(run.run_id), timeout=20, what="lapsed")
    assert reason == "heartbeat_lapsed"
    assert run.run_id not in sweep(stub, 30)
    # the new attempt takes it over; when that one dies too, it is handed out again
    again = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w2"))
    assert again.claimed and again.attempt_token != claim.attempt_token
    assert again.run.attempt == claim.run.attempt + 1
    reason = eventually(lambda: sweep(stub, 30).get(run.run_id), timeout=20, what="lapsed again")
    assert reason == "heartbeat_lapsed"


def test_dead_letter_list_and_replay(store: StoreProcess) -> None:
    stub = store.stub()
    run = record_run(stub, create_schedule(stub).schedule_id, fire=PAST).run
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
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
    again = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w2"))
    assert again.claimed and again.run.attempt == claim.run.attempt + 1
    # and only a dead-lettered run can be replayed
    refused = rpc_error(stub.ReplayDeadLetter, api.ReplayDeadLetterRequest(run_id=run.run_id))
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "is not dead-lettered" in refused.details()


def lost_pages(stub, lost_at: datetime, limit: int) -> tuple[dict[str, str], int]:
    """Every page of RequeueLostRuns: the runs handed out (id -> reason), and how many
    calls it took."""
    found: dict[str, str] = {}
    after = ""
    for calls in range(1, 101):
        page = stub.RequeueLostRuns(
            api.RequeueLostRunsRequest(
                lost_at=dt_to_ts(lost_at),
                pending_for=td_to_duration(timedelta(seconds=30)),
                after_run_id=after,
                limit=limit,
            )
        )
        found.update({s.run.run_id: s.reason for s in page.runs})
        after = page.next_after_run_id
        if not after:
            return found, calls
    raise AssertionError("RequeueLostRuns kept paging")


def test_a_lost_queue_hands_out_every_pending_run_recorded_before_it_at_once(
    store: StoreProcess,
) -> None:
    # Given runs of every kind, recorded before the queue lost its messages: PENDING and
    # due, one re-sent a moment ago (its next re-send far off), a retry waiting out its
    # delay, and one RUNNING
    stub = store.stub()
    sid = create_schedule(stub).schedule_id
    resent = record_run(stub, sid, fire=PAST).run.run_id
    assert sweep(stub, pending_for=0).get(resent) == "not_picked_up"
    due = [record_run(stub, sid, fire=PAST + timedelta(seconds=i)).run.run_id for i in (1, 2, 3)]
    retry = record_run(stub, sid, fire=PAST + timedelta(seconds=4)).run.run_id
    claim = claim_one(stub, api.ClaimRunRequest(run_id=retry, worker_id="w1"))
    complete_one(
        stub,
        api.CompleteRunRequest(
            run_id=retry,
            attempt_token=claim.attempt_token,
            state=pb.RUN_STATE_FAILED,
            error="Flaky: once",
            retry_after=td_to_duration(timedelta(seconds=1)),
        ),
    )
    running = record_run(stub, sid, fire=PAST + timedelta(seconds=5)).run.run_id
    assert claim_one(stub, api.ClaimRunRequest(run_id=running, worker_id="w1")).claimed
    lost_at = datetime.now(UTC)
    # and one recorded after the loss (its message went to the queue as it is now)
    after = record_run(stub, sid, fire=PAST + timedelta(seconds=6)).run.run_id

    # When the runs of the lost queue are asked for, two a page
    found, calls = lost_pages(stub, lost_at, limit=2)

    # Then every due PENDING run recorded before the loss is handed out at once, whatever
    # its resend schedule; the retry, the running run and the later run are not
    assert found == {run_id: "queue_lost" for run_id in [resent, *due]}
    assert calls == 3  # 5 PENDING runs recorded before the loss, 2 a page
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=due[0])).events
    assert [(e.kind, e.detail) for e in events][-1] == ("requeued", "queue_lost")
    # and the ordinary sweep does not send them again before its bound
    assert not set(found) & set(sweep(stub, pending_for=30))
    # while the retry is handed out by the ordinary sweep as soon as its delay is over
    assert (
        eventually(lambda: sweep(stub, pending_for=30).get(retry), timeout=5, what="retry due")
        == "not_picked_up"
    )
    assert after not in found and running not in found


def test_requeue_lost_runs_refuses_a_request_without_an_instant_or_with_a_huge_page(
    store: StoreProcess,
) -> None:
    stub = store.stub()
    missing = rpc_error(stub.RequeueLostRuns, api.RequeueLostRunsRequest())
    assert missing.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert missing.details() == "lost_at: required"
    huge = rpc_error(
        stub.RequeueLostRuns,
        api.RequeueLostRunsRequest(lost_at=dt_to_ts(datetime.now(UTC)), limit=1_000_000),
    )
    assert huge.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert huge.details().startswith("limit: must be between 0 and 10000")


def sweep_with_waits(stub, pending_for: float, waits: dict[str, float]) -> dict[str, str]:
    response = stub.RequeueStalledRuns(
        api.RequeueStalledRunsRequest(
            pending_for=td_to_duration(timedelta(seconds=pending_for)),
            queue_waits={q: td_to_duration(timedelta(seconds=w)) for q, w in waits.items()},
        )
    )
    return {s.run.run_id: s.reason for s in response.runs}


def test_a_queue_backlog_holds_back_only_its_own_queue_runs(store: StoreProcess) -> None:
    stub = store.stub()
    run = record_run(stub, create_schedule(stub).schedule_id, fire=PAST).run
    assert run.queue == "default"
    time.sleep(1.0)
    # Past the bound, but its queue's oldest message has waited a minute: not lost yet
    assert run.run_id not in sweep_with_waits(stub, 0.5, {"default": 60})
    # Another queue's backlog does not hold it back
    assert sweep_with_waits(stub, 0.5, {"bulk": 60}).get(run.run_id) == "not_picked_up"
    kinds = [e.kind for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events]
    assert kinds == ["recorded", "enqueued", "requeued"]


def test_requeue_stalled_runs_refuses_a_negative_unnamed_or_too_many_queue_waits(
    store: StoreProcess,
) -> None:
    stub = store.stub()
    negative = rpc_error(
        stub.RequeueStalledRuns,
        api.RequeueStalledRunsRequest(queue_waits={"bulk": td_to_duration(timedelta(seconds=-1))}),
    )
    assert negative.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert negative.details() == "queue_waits['bulk']: must not be negative"
    unnamed = rpc_error(
        stub.RequeueStalledRuns,
        api.RequeueStalledRunsRequest(queue_waits={"": td_to_duration(timedelta(seconds=1))}),
    )
    assert unnamed.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert unnamed.details() == "queue_waits['']: required"
    # Counted before any entry is read: the last of these is malformed, yet the count is named
    crowd = {f"q{i}": td_to_duration(timedelta(seconds=1)) for i in range(1000)}
    crowd["bad name!"] = td_to_duration(timedelta(seconds=-1))
    too_many = rpc_error(stub.RequeueStalledRuns, api.RequeueStalledRunsRequest(queue_waits=crowd))
    assert too_many.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert too_many.details() == "queue_waits: at most 1000 queues, got 1001"
