"""Heartbeats over real gRPC: one call renews every attempt a worker holds, each item
answered as its single Heartbeat would be; a body's start sent by a heartbeat and
again by the completion or as an appended event (its answer lost) is one ``started``
event per attempt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import td_to_duration
from cronwave_core.domain.progress import Progress
from cronwave_core.status import status_code
from tests.harness.store import claimed_run, rpc_error
from tests.helpers import complete_one, get_one

pytestmark = pytest.mark.both_backends


def _kinds(stub, run_id: str) -> list[str]:
    return [e.kind for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run_id)).events]


def test_one_call_renews_every_attempt_and_refuses_each_bad_item_alone(stub):
    # Given three running attempts, one of them cancelled with a grace
    runs = [claimed_run(stub) for _ in range(3)]
    (fine, _), (cancelled, _), (other, other_token) = runs
    stub.CancelRun(
        api.CancelRunRequest(
            run_id=cancelled.run_id,
            reason="not tonight",
            grace=td_to_duration(timedelta(seconds=60)),
        )
    )
    before = {run.run_id: get_one(stub, run.run_id).heartbeat_at.ToDatetime() for run, _ in runs}

    # When one Heartbeats call names them all, one with a wrong token, plus a run the
    # store never had
    beats = [api.HeartbeatRequest(run_id=run.run_id, attempt_token=token) for run, token in runs]
    beats[2].attempt_token = "f" * 32
    beats[0].checkpoint_json = '{"step": 4}'
    beats.append(api.HeartbeatRequest(run_id="no-such-run", attempt_token="0" * 32))
    results = stub.Heartbeats(api.HeartbeatsRequest(beats=beats)).results

    # Then each item has its own answer, in order
    assert [r.HasField("error") for r in results] == [False, False, True, True]
    assert not results[0].beat.cancel_requested
    assert results[1].beat.cancel_requested
    assert results[1].beat.cancel_reason == "not tonight"
    assert status_code(results[2].error.code) is grpc.StatusCode.FAILED_PRECONDITION
    assert "attempt_token" in results[2].error.message
    assert status_code(results[3].error.code) is grpc.StatusCode.NOT_FOUND
    # ... the good ones renewed (the checkpoint kept), the refused one untouched
    now = {run.run_id: get_one(stub, run.run_id) for run, _ in runs}
    assert now[fine.run_id].heartbeat_at.ToDatetime() > before[fine.run_id]
    assert now[fine.run_id].checkpoint_json == '{"step": 4}'
    assert now[cancelled.run_id].heartbeat_at.ToDatetime() > before[cancelled.run_id]
    assert now[other.run_id].heartbeat_at.ToDatetime() == before[other.run_id]
    assert other_token  # its real token still holds it
    assert now[other.run_id].state == pb.RUN_STATE_WAITING


def test_a_start_reported_twice_is_one_started_event_of_the_attempt(stub):
    # Given a running attempt whose body began
    run, token = claimed_run(stub)
    began = datetime.now(UTC).replace(microsecond=0)
    beat = api.HeartbeatRequest(run_id=run.run_id, attempt_token=token)
    beat.body_started_at.FromDatetime(began)

    # When a heartbeat carries the start twice (an answer lost, the call retried) and
    # the completion carries it again (no answer came back before the body ended)
    stub.Heartbeats(api.HeartbeatsRequest(beats=[beat]))
    stub.Heartbeats(api.HeartbeatsRequest(beats=[beat]))
    completion = api.CompleteRunRequest(
        run_id=run.run_id, attempt_token=token, state=pb.RUN_STATE_SUCCEEDED
    )
    completion.body_started_at.FromDatetime(began)
    complete_one(stub, completion)

    # Then the history has the attempt's start once
    assert _kinds(stub, run.run_id).count("started") == 1
    assert get_one(stub, run.run_id).started_at.ToDatetime(tzinfo=UTC) == began


def test_a_start_appended_after_a_heartbeat_recorded_it_is_not_written_again(stub):
    # Given an attempt whose start a heartbeat recorded (its answer never came back)
    run, token = claimed_run(stub)
    beat = api.HeartbeatRequest(run_id=run.run_id, attempt_token=token)
    beat.body_started_at.GetCurrentTime()
    stub.Heartbeats(api.HeartbeatsRequest(beats=[beat]))
    (recorded,) = [
        e
        for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
        if e.kind == "started"
    ]

    # When the worker, ending the attempt without a completion (dead-lettered or
    # superseded), appends the start twice more in one call, with another event
    start = api.AppendRunEventRequest(run_id=run.run_id, kind="started", detail="again")
    other = api.AppendRunEventRequest(run_id=run.run_id, kind="note", detail="kept")
    batch = api.AppendRunEventsRequest(events=[start, other, start])
    results = stub.AppendRunEvents(batch).results

    # Then each start is answered with the recorded one, and only the other is written
    assert [r.event.seq for r in results[::2]] == [recorded.seq, recorded.seq]
    assert results[1].event.seq > recorded.seq and results[1].event.kind == "note"
    kinds = _kinds(stub, run.run_id)
    assert kinds.count("started") == 1 and kinds.count("note") == 1


def test_a_start_appended_for_a_new_attempt_is_written_once(stub):
    # Given an attempt whose start no heartbeat carried
    run, _ = claimed_run(stub)

    # When its start is appended twice in one call
    start = api.AppendRunEventRequest(run_id=run.run_id, kind="started", detail="began")
    results = stub.AppendRunEvents(api.AppendRunEventsRequest(events=[start, start])).results

    # Then it is written once, and both items are answered with it
    assert results[0].event.seq == results[1].event.seq
    assert results[0].event.attempt == 1 and results[0].event.detail == "began"
    assert _kinds(stub, run.run_id).count("started") == 1


def test_a_held_run_is_waiting_until_a_beat_carries_its_start_then_running(stub):
    # Given two runs claimed ahead of their fire time: held, no body begun
    (one, one_token), (two, two_token) = claimed_run(stub), claimed_run(stub)
    assert one.state == two.state == pb.RUN_STATE_WAITING
    # and beaten while they wait: still WAITING
    waits = [
        api.HeartbeatRequest(run_id=one.run_id, attempt_token=one_token),
        api.HeartbeatRequest(run_id=two.run_id, attempt_token=two_token),
    ]
    stub.Heartbeats(api.HeartbeatsRequest(beats=waits))
    assert get_one(stub, one.run_id).state == pb.RUN_STATE_WAITING

    # When one call carries the first body's start, with a checkpoint, and the second's
    # plain beat
    began = datetime.now(UTC).replace(microsecond=0)
    start = api.HeartbeatRequest(
        run_id=one.run_id, attempt_token=one_token, checkpoint_json='{"step": 1}'
    )
    start.body_started_at.FromDatetime(began)
    results = stub.Heartbeats(api.HeartbeatsRequest(beats=[start, waits[1]])).results

    # Then the started one is RUNNING with its start and checkpoint, the other WAITING
    assert [r.HasField("error") for r in results] == [False, False]
    got = get_one(stub, one.run_id)
    assert got.state == pb.RUN_STATE_RUNNING
    assert got.started_at.ToDatetime(tzinfo=UTC) == began
    assert got.checkpoint_json == '{"step": 1}'
    assert get_one(stub, two.run_id).state == pb.RUN_STATE_WAITING
    # and a WAITING run is handed back as a running one is
    released = stub.ReleaseRun(
        api.ReleaseRunRequest(run_id=two.run_id, attempt_token=two_token, reason="stop")
    )
    assert released.run.state == pb.RUN_STATE_PENDING


def test_a_start_whose_heartbeats_were_all_lost_is_recorded_by_the_completion(stub):
    # Given a running attempt whose heartbeats never reached the store
    run, token = claimed_run(stub)
    began = datetime.now(UTC).replace(microsecond=0)

    # When its completion carries the body's start
    completion = api.CompleteRunRequest(
        run_id=run.run_id, attempt_token=token, state=pb.RUN_STATE_SUCCEEDED
    )
    completion.body_started_at.FromDatetime(began)
    complete_one(stub, completion)

    # Then the start is recorded once
    assert _kinds(stub, run.run_id).count("started") == 1


def test_a_batch_over_the_limit_is_refused_naming_the_field(stub):
    beats = [api.HeartbeatRequest(run_id=f"r{i}", attempt_token="0" * 32) for i in range(1001)]
    error = rpc_error(stub.Heartbeats, api.HeartbeatsRequest(beats=beats))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith("beats: at most 1000 per call")


def test_a_malformed_item_is_refused_naming_it_and_nothing_is_renewed(stub):
    run, token = claimed_run(stub)
    before = get_one(stub, run.run_id).heartbeat_at
    beats = [
        api.HeartbeatRequest(run_id=run.run_id, attempt_token=token),
        api.HeartbeatRequest(run_id=run.run_id, attempt_token="not-a-token"),
    ]
    error = rpc_error(stub.Heartbeats, api.HeartbeatsRequest(beats=beats))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details().startswith("beats[1].attempt_token:")
    assert get_one(stub, run.run_id).heartbeat_at == before


def test_a_beats_progress_is_kept_on_the_run_and_a_malformed_one_named(stub):
    # Given a running attempt
    run, token = claimed_run(stub)
    at = datetime(2030, 1, 1, 2, 0, 7, tzinfo=UTC)

    # When its heartbeat carries the body's progress, then another beat carries none
    beat = api.HeartbeatRequest(run_id=run.run_id, attempt_token=token)
    beat.progress.CopyFrom(Progress(1_250, 60_000, "customers charged", at).to_proto())
    stub.Heartbeats(api.HeartbeatsRequest(beats=[beat]))
    bare = api.HeartbeatRequest(run_id=run.run_id, attempt_token=token)
    stub.Heartbeats(api.HeartbeatsRequest(beats=[bare]))

    # Then the run reads it back as it was reported, in every read of it
    assert Progress.from_proto(get_one(stub, run.run_id).progress) == Progress(
        1_250, 60_000, "customers charged", at
    )
    listed = stub.ListRuns(api.ListRunsRequest(schedule_id=run.schedule_id)).runs
    assert listed[0].progress.done == 1_250
    recent = stub.ListRecentRuns(
        api.ListRecentRunsRequest(schedule_ids=[run.schedule_id], per_schedule=1)
    ).runs
    assert recent[0].progress.unit == "customers charged"
    # ... and a progress whose unit is too long is refused, naming the field
    beat.progress.unit = "x" * 65
    error = rpc_error(stub.Heartbeats, api.HeartbeatsRequest(beats=[beat]))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "progress.unit" in (error.details() or "")
