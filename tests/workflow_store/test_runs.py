"""Recording runs over real gRPC: one run per fire (by the database), fencing, history."""

from __future__ import annotations

import threading
from datetime import timedelta
from functools import partial

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from tests.harness.store import (
    FIRE,
    PAST_FIRE,
    create_schedule,
    record_missed,
    record_run,
    rpc_error,
)
from tests.helpers import append_one, claim_one, complete_one, record_one


def test_record_run_is_idempotent(stub):
    # Given a schedule
    schedule = create_schedule(stub)

    # When the same fire is recorded twice
    first = record_run(stub, schedule.schedule_id)
    second = record_run(stub, schedule.schedule_id)

    # Then one PENDING run exists and the second call returns it
    assert first.created and not second.created
    assert second.run == first.run
    run = first.run
    assert run.run_id.startswith("run_") and len(run.run_id) == 30
    assert run.state == pb.RUN_STATE_PENDING
    assert run.trigger == pb.TRIGGER_KIND_SCHEDULED
    assert run.attempt == 0 and run.fencing_token == 1
    assert run.job_type == schedule.job_type
    assert run.payload_json == schedule.payload_json
    assert run.queue == "default"
    assert run.idempotency_key == f"{schedule.schedule_id}@2030-01-01T02:00:00+00:00"
    assert run.fire_time == dt_to_ts(FIRE)
    runs = stub.ListRuns(api.ListRunsRequest(schedule_id=schedule.schedule_id)).runs
    assert [r.run_id for r in runs] == [run.run_id]
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [e.kind for e in events] == ["recorded", "enqueued"]


def test_concurrent_records_of_one_fire_create_one_run(stub):
    # Given a schedule and eight recorders that start together
    schedule = create_schedule(stub)
    barrier = threading.Barrier(8)
    results: list[api.RecordRunResponse] = []
    errors: list[BaseException] = []

    def recorder() -> None:
        try:
            barrier.wait(timeout=10)
            results.append(record_run(stub, schedule.schedule_id, token=3))
        except BaseException as exc:
            errors.append(exc)

    # When they all record the same fire
    threads = [threading.Thread(target=recorder) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    # Then exactly one created the run and all got it back
    assert not errors, errors
    assert len(results) == 8
    assert sum(r.created for r in results) == 1
    assert len({r.run.run_id for r in results}) == 1
    runs = stub.ListRuns(api.ListRunsRequest(schedule_id=schedule.schedule_id)).runs
    assert len(runs) == 1
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=runs[0].run_id)).events
    assert [e.kind for e in events] == ["recorded", "enqueued"]


def test_stale_fencing_token_is_refused_and_nothing_written(stub):
    # Given a store that has seen fencing token 5
    schedule = create_schedule(stub)
    sid = schedule.schedule_id
    record_run(stub, sid, FIRE, token=5)
    assert stub.GetFencingToken(api.GetFencingTokenRequest()).fencing_token == 5

    # When a deposed leader records a new fire and a missed fire with token 4
    later = FIRE + timedelta(days=1)
    err = rpc_error(record_run, stub, sid, later, token=4)
    missed_err = rpc_error(record_missed, stub, sid, later, reason="down", token=4)

    # Then both are refused, naming the token, and no run exists for that fire
    for e in (err, missed_err):
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert e.details().startswith("fencing_token: 4 is older than 5")
    runs = stub.ListRuns(api.ListRunsRequest(schedule_id=sid)).runs
    assert [r.fire_time for r in runs] == [dt_to_ts(FIRE)]
    assert stub.GetFencingToken(api.GetFencingTokenRequest()).fencing_token == 5

    # And a newer leader's token is accepted and remembered; scopes are separate
    assert record_run(stub, sid, later, token=6).created
    assert (
        stub.GetFencingToken(api.GetFencingTokenRequest(fencing_scope="planner")).fencing_token == 6
    )
    assert (
        stub.GetFencingToken(api.GetFencingTokenRequest(fencing_scope="other")).fencing_token == 0
    )


def test_fencing_token_is_required_for_planner_triggers(stub):
    sid = create_schedule(stub).schedule_id
    for trigger in (
        pb.TRIGGER_KIND_UNSPECIFIED,
        pb.TRIGGER_KIND_SCHEDULED,
        pb.TRIGGER_KIND_CATCHUP,
        pb.TRIGGER_KIND_BACKFILL,
    ):
        err = rpc_error(record_run, stub, sid, FIRE, token=0, trigger=trigger)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details().startswith("runs[0].fencing_token: required")
    assert stub.ListRuns(api.ListRunsRequest(schedule_id=sid)).runs == []

    manual = record_run(stub, sid, FIRE, token=0, trigger=pb.TRIGGER_KIND_MANUAL)
    assert manual.created and manual.run.trigger == pb.TRIGGER_KIND_MANUAL


def test_record_run_needs_a_live_schedule_and_a_fire_time(stub):
    sid = create_schedule(stub).schedule_id
    err = rpc_error(record_one, stub, api.RecordRunRequest(schedule_id=sid, fencing_token=1))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("runs[0].fire_time: ")

    stub.DeleteSchedule(api.DeleteScheduleRequest(schedule_id=sid))
    err = rpc_error(record_run, stub, sid)
    assert err.code() == grpc.StatusCode.NOT_FOUND
    err = rpc_error(record_run, stub, "never-existed")
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_record_missed(stub):
    sid = create_schedule(stub).schedule_id
    first, run = record_missed(stub, sid, PAST_FIRE, reason="store was down", token=2)
    second, again = record_missed(stub, sid, PAST_FIRE, reason="store was down", token=2)
    scheduled = record_run(stub, sid, PAST_FIRE, token=2)

    assert first == 1 and second == 0 and not scheduled.created
    assert run is not None and again == run
    assert run.state == pb.RUN_STATE_MISSED
    assert run.error == "store was down"
    assert scheduled.run.run_id == run.run_id
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [(e.kind, e.detail) for e in events] == [("missed", "store was down")]


def test_list_runs_newest_first_with_filters(stub):
    sid = create_schedule(stub).schedule_id
    other = create_schedule(stub).schedule_id
    fires = [FIRE + timedelta(hours=h) for h in (2, 0, 1)]
    ids = {f: record_run(stub, sid, f).run.run_id for f in fires}
    record_run(stub, other, FIRE)
    _, missed = record_missed(stub, sid, PAST_FIRE)  # older than every fire above
    assert missed is not None

    runs = stub.ListRuns(api.ListRunsRequest(schedule_id=sid)).runs
    limited = stub.ListRuns(api.ListRunsRequest(schedule_id=sid, limit=2)).runs
    pending = stub.ListRuns(
        api.ListRunsRequest(schedule_id=sid, states=[pb.RUN_STATE_PENDING])
    ).runs
    only_missed = stub.ListRuns(api.ListRunsRequest(states=[pb.RUN_STATE_MISSED])).runs
    everything = stub.ListRuns(api.ListRunsRequest()).runs

    newest_first = [ids[f] for f in sorted(fires, reverse=True)]
    assert [r.run_id for r in runs] == [*newest_first, missed.run_id]
    assert [r.run_id for r in limited] == newest_first[:2]
    assert [r.run_id for r in pending] == newest_first
    assert [r.run_id for r in only_missed] == [missed.run_id]
    assert len(everything) == 5


def test_run_events_in_order(stub):
    # Given a recorded run
    run = record_run(stub, create_schedule(stub).schedule_id).run

    # When things happen to it
    append_one(stub, api.AppendRunEventRequest(run_id=run.run_id, kind="note", detail="q"))
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w-1"))
    appended = append_one(
        stub, api.AppendRunEventRequest(run_id=run.run_id, kind="progress", detail="50%")
    )
    complete_one(
        stub,
        api.CompleteRunRequest(
            run_id=run.run_id, attempt_token=claim.attempt_token, state=pb.RUN_STATE_SUCCEEDED
        ),
    )

    # Then the history lists them oldest first, each with its attempt
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [(e.kind, e.detail, e.attempt) for e in events] == [
        ("recorded", "trigger=scheduled fencing_token=1", 0),
        ("enqueued", "default", 0),
        ("note", "q", 0),
        ("claimed", "w-1", 1),
        ("progress", "50%", 1),
        ("succeeded", "", 1),
    ]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 6
    assert appended.seq == seqs[4] and appended.run_id == run.run_id
    ats = [e.at.ToDatetime() for e in events]
    assert ats == sorted(ats)


def test_run_lookups_and_events_need_a_known_run(stub):
    for call, req in [
        (stub.ListRunEvents, api.ListRunEventsRequest(run_id="run_missing")),
        (partial(append_one, stub), api.AppendRunEventRequest(run_id="run_missing", kind="x")),
        (partial(claim_one, stub), api.ClaimRunRequest(run_id="run_missing", worker_id="w")),
    ]:
        err = rpc_error(call, req)
        assert err.code() == grpc.StatusCode.NOT_FOUND, call
        assert "run_missing" in err.details()
    # a read of runs leaves out the runs the store does not have
    missing = api.GetRunsRequest(runs=[api.GetRunRequest(run_id="run_missing")])
    assert list(stub.GetRuns(missing).runs) == []
    run = record_run(stub, create_schedule(stub).schedule_id).run
    err = rpc_error(append_one, stub, api.AppendRunEventRequest(run_id=run.run_id))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("events[0].kind: ")


def test_an_empty_run_id_gets_one_answer_from_every_rpc_that_takes_one(stub):
    # Given a request of every RPC about runs, each with an empty run id and every
    # other field well formed (a token of the right shape, a kind, a worker)
    token = "0" * 32
    single = {
        "ListRunEvents": (stub.ListRunEvents, api.ListRunEventsRequest()),
        "Heartbeat": (stub.Heartbeat, api.HeartbeatRequest(attempt_token=token)),
        "ReleaseRun": (stub.ReleaseRun, api.ReleaseRunRequest(attempt_token=token)),
        "CancelRun": (stub.CancelRun, api.CancelRunRequest()),
        "ReplayDeadLetter": (stub.ReplayDeadLetter, api.ReplayDeadLetterRequest()),
    }
    batches = {
        "runs": (stub.GetRuns, api.GetRunsRequest(runs=[api.GetRunRequest()])),
        "claims": (
            stub.ClaimRuns,
            api.ClaimRunsRequest(claims=[api.ClaimRunRequest(worker_id="w")]),
        ),
        "completions": (
            stub.CompleteRuns,
            api.CompleteRunsRequest(
                completions=[
                    api.CompleteRunRequest(attempt_token=token, state=pb.RUN_STATE_SUCCEEDED)
                ]
            ),
        ),
        "events": (
            stub.AppendRunEvents,
            api.AppendRunEventsRequest(events=[api.AppendRunEventRequest(kind="note")]),
        ),
    }

    # When each is sent
    answers = {name: rpc_error(call, req) for name, (call, req) in single.items()}
    items = {field: rpc_error(call, req) for field, (call, req) in batches.items()}

    # Then every one is refused alike: INVALID_ARGUMENT, naming the field, rule "required"
    got = {name: (err.code(), err.details()) for name, err in answers.items()}
    assert got == {name: (grpc.StatusCode.INVALID_ARGUMENT, "run_id: required") for name in single}
    got = {field: (err.code(), err.details()) for field, err in items.items()}
    assert got == {
        field: (grpc.StatusCode.INVALID_ARGUMENT, f"{field}[0].run_id: required")
        for field in batches
    }
