"""Batch calls over real gRPC: one transaction per call, an answer or an ItemError per
item, and the same rules as the single calls."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts, td_to_duration
from tests.harness.store import (
    FIRE,
    StoreProcess,
    create_schedule,
    record_run,
    rpc_error,
)
from tests.helpers import complete_one, get_one

FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION.value[0]
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]


def _run_req(schedule_id: str, hours: int = 0, token: int = 1) -> api.RecordRunRequest:
    return api.RecordRunRequest(
        schedule_id=schedule_id,
        fire_time=dt_to_ts(FIRE + timedelta(hours=hours)),
        fencing_token=token,
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )


def _runs(stub, schedule_id: str) -> list[pb.Run]:
    return list(stub.ListRuns(api.ListRunsRequest(schedule_id=schedule_id, limit=1000)).runs)


def _kinds(stub, run_id: str) -> list[str]:
    return [e.kind for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run_id)).events]


def _claims(stub, run_ids: list[str], worker: str) -> list[api.ClaimRunResult]:
    """``worker`` claims ``run_ids``, as a worker of the default queue."""
    claims = [api.ClaimRunRequest(run_id=r, worker_id=worker) for r in run_ids]
    return list(stub.ClaimRuns(api.ClaimRunsRequest(claims=claims, queues=["default"])).results)


def _done(run_id: str, token: str, **kw: object) -> api.CompleteRunRequest:
    kw.setdefault("state", pb.RUN_STATE_SUCCEEDED)
    return api.CompleteRunRequest(run_id=run_id, attempt_token=token, **kw)  # type: ignore[arg-type]


def _together(jobs: list[Callable[[], object]]) -> list[object]:
    """Run ``jobs`` on threads released at once; their results in order."""
    barrier = threading.Barrier(len(jobs))
    results: list[object] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = jobs[i]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not [t for t in threads if t.is_alive()], "a batch call did not return"
    assert not errors, errors
    return results


def test_record_runs_answers_each_item_and_writes_only_the_accepted(stub):
    # Given a schedule whose 02:00 run exists, recorded with fencing token 5
    sid = create_schedule(stub).schedule_id
    existing = record_run(stub, sid, FIRE, token=5).run

    # When one batch records a new slot, the existing slot, an unknown schedule, a
    # deposed leader's slot and the new slot again
    results = stub.RecordRuns(
        api.RecordRunsRequest(
            runs=[
                _run_req(sid, 1, token=5),
                _run_req(sid, 0, token=5),
                _run_req("never-existed", 2, token=5),
                _run_req(sid, 3, token=4),
                _run_req(sid, 1, token=6),
            ]
        )
    ).results

    # Then each item has the answer its single call would have had
    new, again, unknown, stale, repeat = results
    assert new.recorded.created and not new.HasField("error")
    assert new.recorded.run.state == pb.RUN_STATE_PENDING
    assert new.recorded.run.fencing_token == 5
    assert new.recorded.run.idempotency_key == f"{sid}@2030-01-01T03:00:00+00:00"
    # (a batch's runs come back without their payloads: nothing on its path reads them)
    existing.ClearField("payload_json")
    assert not again.recorded.created and again.recorded.run == existing
    assert not unknown.HasField("recorded")
    assert unknown.error.code == NOT_FOUND
    assert unknown.error.message == rpc_error(record_run, stub, "never-existed").details()
    assert stale.error.code == FAILED_PRECONDITION
    assert stale.error.message.startswith("fencing_token: 4 is older than 5")
    assert not repeat.recorded.created and repeat.recorded.run == new.recorded.run

    # And exactly the accepted rows were written: one new run with its one event, and
    # the newest token remembered
    runs = _runs(stub, sid)
    assert sorted(r.run_id for r in runs) == sorted([existing.run_id, new.recorded.run.run_id])
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=new.recorded.run.run_id)).events
    assert [(e.kind, e.detail) for e in events] == [
        ("recorded", "trigger=scheduled fencing_token=5")
    ]
    assert _kinds(stub, existing.run_id) == ["recorded", "enqueued"]
    assert stub.GetFencingToken(api.GetFencingTokenRequest()).fencing_token == 6


def test_a_run_recorded_for_enqueue_gets_its_enqueued_event_with_its_record(stub):
    # Given a schedule whose 02:00 run exists
    sid = create_schedule(stub).schedule_id
    existing = record_run(stub, sid, FIRE, token=5).run

    # When a batch records a new slot and the existing one, both to be enqueued
    requests = [_run_req(sid, 1, token=5), _run_req(sid, 0, token=5)]
    for request in requests:
        request.enqueue = True
    new, again = stub.RecordRuns(api.RecordRunsRequest(runs=requests)).results

    # Then the new run's history says recorded, then enqueued on its queue, in one
    # go; the existing run (not created, so not enqueued again) gets nothing
    run = new.recorded.run
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [(e.kind, e.detail) for e in events] == [
        ("recorded", "trigger=scheduled fencing_token=5"),
        ("enqueued", run.queue),
    ]
    assert not again.recorded.created
    assert _kinds(stub, existing.run_id) == ["recorded", "enqueued"]


def test_a_malformed_item_fails_the_whole_batch_and_writes_nothing(stub):
    # Given a schedule and a run of it, claimed
    sid = create_schedule(stub).schedule_id
    run = record_run(stub, sid, FIRE).run
    claim = _claims(stub, [run.run_id], "w1")[0].claim
    assert claim.claimed

    # When batches carry a valid item and a malformed one
    bad_runs = [
        (api.RecordRunRequest(fire_time=dt_to_ts(FIRE), fencing_token=1), "runs[1].schedule_id"),
        (api.RecordRunRequest(schedule_id=sid, fencing_token=1), "runs[1].fire_time"),
        (api.RecordRunRequest(schedule_id=sid, fire_time=dt_to_ts(FIRE)), "runs[1].fencing_token"),
    ]
    for bad, field in bad_runs:
        err = rpc_error(stub.RecordRuns, api.RecordRunsRequest(runs=[_run_req(sid, 5), bad]))
        # Then the call fails naming the item's field
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details().startswith(f"{field}: "), err.details()
    token = claim.attempt_token
    calls = [
        (
            stub.ClaimRuns,
            api.ClaimRunsRequest(claims=[api.ClaimRunRequest(run_id=run.run_id)]),
            "claims[0].worker_id: required",
        ),
        (
            stub.ClaimRuns,
            api.ClaimRunsRequest(claims=[api.ClaimRunRequest(worker_id="w")]),
            "claims[0].run_id: required",
        ),
        (
            stub.CompleteRuns,
            api.CompleteRunsRequest(
                completions=[_done(run.run_id, token), _done(run.run_id, token, state=0)]
            ),
            "completions[1].state: must be one of",
        ),
        (
            stub.CompleteRuns,
            api.CompleteRunsRequest(
                completions=[
                    _done(run.run_id, token),
                    _done(
                        run.run_id,
                        token,
                        state=pb.RUN_STATE_FAILED,
                        retry_after=td_to_duration(timedelta(seconds=-1)),
                    ),
                ]
            ),
            "completions[1].retry_after: must not be negative",
        ),
        (
            stub.CompleteRuns,
            api.CompleteRunsRequest(completions=[_done("", token)]),
            "completions[0].run_id: required",
        ),
        (
            stub.AppendRunEvents,
            api.AppendRunEventsRequest(
                events=[
                    api.AppendRunEventRequest(run_id=run.run_id, kind="enqueued"),
                    api.AppendRunEventRequest(run_id=run.run_id),
                ]
            ),
            "events[1].kind: required",
        ),
        (
            stub.RecordRuns,
            api.RecordRunsRequest(runs=[_run_req(sid, 10 + i) for i in range(1001)]),
            "runs: at most 1000 per call, got 1001",
        ),
    ]
    for call, request, message in calls:
        err = rpc_error(call, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details().startswith(message), err.details()

    # And nothing was written: the one run, still held, with its three events
    assert [r.run_id for r in _runs(stub, sid)] == [run.run_id]
    got = get_one(stub, run.run_id)
    assert got.state == pb.RUN_STATE_WAITING
    assert _kinds(stub, run.run_id) == ["recorded", "enqueued", "claimed"]
    # An empty batch is answered with no results
    assert list(stub.RecordRuns(api.RecordRunsRequest()).results) == []
    assert list(stub.ClaimRuns(api.ClaimRunsRequest()).results) == []
    assert list(stub.CompleteRuns(api.CompleteRunsRequest()).results) == []
    assert list(stub.AppendRunEvents(api.AppendRunEventsRequest()).results) == []


def test_concurrent_record_batches_make_one_run_per_slot(store: StoreProcess, stub):
    # Given a schedule and two batches of 60 slots that share 30, in opposite orders
    sid = create_schedule(stub).schedule_id
    first = [_run_req(sid, h, token=2) for h in range(60)]
    second = [_run_req(sid, h, token=2) for h in reversed(range(30, 90))]
    stubs = [store.stub(), store.stub()]

    # When both are recorded at once, twice over
    answers: list[list[api.RecordRunResult]] = []
    for _ in range(2):
        got = _together(
            [
                lambda: stubs[0].RecordRuns(api.RecordRunsRequest(runs=first)).results,
                lambda: stubs[1].RecordRuns(api.RecordRunsRequest(runs=second)).results,
            ]
        )
        answers.extend(list(results) for results in got)  # type: ignore[call-overload]

    # Then every slot has exactly one run, created by exactly one item
    by_slot: dict[int, set[str]] = {}
    created: dict[int, int] = {}
    for requests, results in zip([first, second, first, second], answers, strict=True):
        assert len(results) == len(requests)
        for req, result in zip(requests, results, strict=True):
            assert not result.HasField("error"), result.error
            slot = req.fire_time.seconds
            assert result.recorded.run.fire_time == req.fire_time
            by_slot.setdefault(slot, set()).add(result.recorded.run.run_id)
            created[slot] = created.get(slot, 0) + result.recorded.created
    assert len(by_slot) == 90
    assert all(len(ids) == 1 for ids in by_slot.values())
    assert all(count == 1 for count in created.values())
    runs = _runs(stub, sid)
    assert len(runs) == 90
    assert {r.run_id for r in runs} == {i for ids in by_slot.values() for i in ids}
    assert all(_kinds(stub, r.run_id) == ["recorded"] for r in runs[:5])


def test_concurrent_claim_batches_claim_each_run_once(store: StoreProcess, stub):
    # Given 20 pending runs, enqueued
    sid = create_schedule(stub).schedule_id
    requests = [_run_req(sid, h) for h in range(20)]
    for request in requests:
        request.enqueue = True
    recorded = stub.RecordRuns(api.RecordRunsRequest(runs=requests)).results
    ids = [r.recorded.run.run_id for r in recorded]
    stubs = [store.stub(), store.stub()]

    # When two workers claim all of them at once, in opposite orders
    one, two = _together(
        [
            lambda: _claims(stubs[0], ids, "w1"),
            lambda: _claims(stubs[1], list(reversed(ids)), "w2"),
        ]
    )

    # Then each run was claimed by exactly one of them, once
    winners: dict[str, list[str]] = {}
    for worker, results in (("w1", one), ("w2", two)):
        for result in results:  # type: ignore[attr-defined]
            assert not result.HasField("error"), result.error
            if result.claim.claimed:
                assert len(result.claim.attempt_token) == 32
                winners.setdefault(result.claim.run.run_id, []).append(worker)
            else:
                assert result.claim.attempt_token == ""
    assert sorted(winners) == sorted(ids)
    assert all(len(w) == 1 for w in winners.values())
    for run_id, (worker,) in winners.items():
        got = get_one(stub, run_id)
        assert got.state == pb.RUN_STATE_WAITING and got.attempt == 1
        assert got.worker_id == worker
        assert _kinds(stub, run_id) == ["recorded", "enqueued", "claimed"]


def test_claim_runs_twice_in_one_batch_and_unknown_runs(stub):
    # Given a pending run
    run = record_run(stub, create_schedule(stub).schedule_id).run

    # When one batch claims it for w1, then for w2, and claims a run that does not exist
    first, second, unknown = _claims(stub, [run.run_id, run.run_id, "run_nope"], "w1")

    # Then the first claim wins and the second finds the live attempt, as in two calls
    assert first.claim.claimed and len(first.claim.attempt_token) == 32
    assert first.claim.run.state == pb.RUN_STATE_WAITING and first.claim.run.worker_id == "w1"
    assert not second.claim.claimed and second.claim.attempt_token == ""
    assert second.claim.run == first.claim.run
    assert unknown.error.code == NOT_FOUND
    assert unknown.error.message == "run_id: no run 'run_nope'"  # each surface adds its hint
    assert _kinds(stub, run.run_id) == ["recorded", "enqueued", "claimed"]


def test_complete_runs_repeated_changes_nothing(stub):
    # Given two claimed runs
    sid = create_schedule(stub).schedule_id
    a, b = (record_run(stub, sid, FIRE + timedelta(hours=h)).run for h in (0, 1))
    (ca, cb) = (r.claim for r in _claims(stub, [a.run_id, b.run_id], "w1"))

    # When one batch completes a twice, b with a stale token, and an unknown run
    batch = api.CompleteRunsRequest(
        completions=[
            _done(a.run_id, ca.attempt_token, result_json='{"n": 1}'),
            _done(a.run_id, ca.attempt_token, state=pb.RUN_STATE_FAILED, error="late"),
            _done(b.run_id, f"{int(cb.attempt_token, 16) ^ 1:032x}"),
            _done("run_nope", "1" * 32),
        ]
    )
    done, again, stale, unknown = stub.CompleteRuns(batch).results

    # Then a succeeded once; the repeat, the stale attempt and the unknown run changed
    # nothing and say so as their single calls would
    assert done.completion.changed and done.completion.run.state == pb.RUN_STATE_SUCCEEDED
    assert done.completion.run.result_json == ""  # answers carry no result
    assert get_one(stub, a.run_id).result_json == '{"n": 1}'
    assert not again.completion.changed and again.completion.run == done.completion.run
    assert stale.error.code == FAILED_PRECONDITION
    assert stale.error.message == rpc_error(complete_one, stub, batch.completions[2]).details()
    assert stale.error.message.startswith("attempt_token: not the current attempt of run")
    assert cb.attempt_token not in stale.error.message
    assert unknown.error.code == NOT_FOUND

    # And the same batch again changes nothing at all
    repeat = stub.CompleteRuns(batch).results
    assert [r.completion.changed for r in repeat[:2]] == [False, False]
    assert repeat[0].completion.run == done.completion.run
    assert _kinds(stub, a.run_id) == ["recorded", "enqueued", "claimed", "succeeded"]
    assert _kinds(stub, b.run_id) == ["recorded", "enqueued", "claimed"]
    got = get_one(stub, b.run_id)
    assert got.state == pb.RUN_STATE_WAITING


def test_complete_runs_with_retry_then_success(stub):
    # Given a claimed run
    run = record_run(stub, create_schedule(stub).schedule_id).run
    claim = _claims(stub, [run.run_id], "w1")[0].claim

    # When a batch fails it with a retry delay
    retry = _done(
        run.run_id,
        claim.attempt_token,
        state=pb.RUN_STATE_FAILED,
        error="boom",
        retry_after=td_to_duration(timedelta(minutes=10)),
    )
    (result,) = stub.CompleteRuns(api.CompleteRunsRequest(completions=[retry])).results

    # Then it is pending again, and not claimable before its delay
    assert result.completion.changed
    assert result.completion.run.state == pb.RUN_STATE_PENDING
    assert result.completion.run.error == "boom"
    assert not _claims(stub, [run.run_id], "w2")[0].claim.claimed
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [(e.kind, e.detail) for e in events][-1] == (
        "retry_scheduled",
        "retry_after=600s error=boom",
    )


@pytest.mark.parametrize("batched", [True, False])
def test_body_started_at_records_the_started_event(stub, batched):
    # Given a claimed run of the 02:00 fire
    run = record_run(stub, create_schedule(stub).schedule_id).run
    claim = _claims(stub, [run.run_id], "w1")[0].claim

    # When its completion says the body began 1.25 ms after the fire time
    request = _done(run.run_id, claim.attempt_token)
    request.body_started_at.FromNanoseconds(int(FIRE.timestamp()) * 10**9 + 1_250_400)
    if batched:
        (result,) = stub.CompleteRuns(api.CompleteRunsRequest(completions=[request])).results
        completion = result.completion
    else:
        completion = complete_one(stub, request)
    assert completion.changed

    # Then the history has the body's start, before the terminal event
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert [(e.kind, e.detail, e.attempt) for e in events[2:]] == [
        ("claimed", "w1", 1),
        ("started", "body_started_at=2030-01-01T02:00:00.001250+00:00 lateness_ms=1.250", 1),
        ("succeeded", "", 1),
    ]

    # And a repeated completion records no second start
    assert not complete_one(stub, request).changed
    assert len(stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events) == 5


def test_append_run_events_in_order(stub):
    # Given a run
    run = record_run(stub, create_schedule(stub).schedule_id).run

    # When a batch appends two events to it and one to an unknown run
    results = stub.AppendRunEvents(
        api.AppendRunEventsRequest(
            events=[
                api.AppendRunEventRequest(run_id=run.run_id, kind="enqueued", detail="q=a"),
                api.AppendRunEventRequest(run_id="run_nope", kind="enqueued"),
                api.AppendRunEventRequest(run_id=run.run_id, kind="note", detail="b"),
            ]
        )
    ).results

    # Then the two are appended in order and the unknown run is refused alone
    assert results[0].event.kind == "enqueued" and results[0].event.detail == "q=a"
    assert results[2].event.seq > results[0].event.seq
    assert results[1].error.code == NOT_FOUND
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events
    assert list(events[2:]) == [results[0].event, results[2].event]


def test_get_runs_answers_the_runs_it_has(stub):
    # Given two runs
    sid = create_schedule(stub).schedule_id
    a, b = (record_run(stub, sid, FIRE + timedelta(hours=h)).run for h in (0, 1))

    # When both, one twice and an unknown run are asked for
    named = [b.run_id, "run_nope", a.run_id, b.run_id]
    runs = stub.GetRuns(api.GetRunsRequest(runs=[api.GetRunRequest(run_id=r) for r in named]))

    # Then each known run comes back once, as it is now
    assert sorted(r.run_id for r in runs.runs) == sorted([a.run_id, b.run_id])
    assert {r.run_id: r for r in runs.runs}[a.run_id] == a
    assert list(stub.GetRuns(api.GetRunsRequest()).runs) == []
    err = rpc_error(stub.GetRuns, api.GetRunsRequest(runs=[api.GetRunRequest(run_id="r")] * 1001))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == "runs: at most 1000 per call, got 1001"


def test_list_runs_of_many_schedules_in_one_call(stub):
    # Given three schedules with runs
    a, b, c = (create_schedule(stub).schedule_id for _ in range(3))
    for sid in (a, b, c):
        record_run(stub, sid, FIRE)
    # When the runs of two of them are asked for at once
    runs = stub.ListRuns(api.ListRunsRequest(schedule_ids=[a, b], limit=10)).runs
    # Then exactly theirs come back
    assert sorted(r.schedule_id for r in runs) == sorted([a, b])
    # and naming schedules both ways is refused by name
    err = rpc_error(stub.ListRuns, api.ListRunsRequest(schedule_id=a, schedule_ids=[b]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith("schedule_ids:")


def test_record_runs_answers_one_run_with_its_payload_when_asked(stub):
    # Given a schedule with a payload, and a record of one of its runs
    sid = create_schedule(stub).schedule_id
    item = api.RecordRunRequest(schedule_id=sid, fire_time=dt_to_ts(FIRE), fencing_token=1)

    # When it is recorded with its payload asked for, and then again without
    whole = stub.RecordRuns(api.RecordRunsRequest(runs=[item], with_payloads=True))
    lean = stub.RecordRuns(api.RecordRunsRequest(runs=[item]))

    # Then the first answer carries the payload, the second (the same run) does not
    assert whole.results[0].recorded.run.payload_json == '{"customers": 100000}'
    assert lean.results[0].recorded.run.payload_json == ""
    assert lean.results[0].recorded.run.run_id == whole.results[0].recorded.run.run_id
    # and payloads are answered for one run only, refused by name before any write
    later = api.RecordRunRequest(
        schedule_id=sid, fire_time=dt_to_ts(FIRE + timedelta(hours=1)), fencing_token=1
    )
    err = rpc_error(stub.RecordRuns, api.RecordRunsRequest(runs=[item, later], with_payloads=True))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("with_payloads: only for one run")
    assert len(stub.ListRuns(api.ListRunsRequest(schedule_id=sid)).runs) == 1
