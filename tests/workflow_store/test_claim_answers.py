"""A ClaimRuns answer stays within every client's 4 MiB receive limit whatever the
claimed runs' payloads: past its budget, a batch's further claims are refused
UNAVAILABLE (not claimed, to be asked again), never answered with a message no client
reads (a worker claiming 30 runs with 250 KiB payloads at once dead-lettered them).

A claim whose answer was lost is asked again with its key and answered with the
attempt it started; any other claim of a held run is refused as before."""

from __future__ import annotations

from datetime import timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.status import status_code
from tests.harness.store import (
    FIRE,
    create_schedule,
    record_run,
    register_job_type,
    rpc_error,
    schedule_msg,
)
from tests.helpers import claim_one, fresh, get_one

pytestmark = pytest.mark.both_backends

KIB = 1024


def _big_run(stub, job: str) -> str:
    schedule = schedule_msg(fresh("big"), job)
    schedule.payload_json = '{"blob": "' + "x" * (250 * KIB - 12) + '"}'
    stub.CreateSchedule(api.CreateScheduleRequest(schedule=schedule))
    return record_run(stub, schedule.schedule_id, FIRE).run.run_id


def test_a_batch_of_big_runs_is_claimed_in_answers_that_fit(stub):
    # Given 30 pending runs whose payloads are 250 KiB each (7.5 MB in all)
    job = register_job_type(stub, heartbeat_timeout=timedelta(seconds=60))
    runs = [_big_run(stub, job) for _ in range(30)]

    # When one ClaimRuns call asks for all of them
    claims = [api.ClaimRunRequest(run_id=r, worker_id="w1") for r in runs]
    reply = stub.ClaimRuns(api.ClaimRunsRequest(claims=claims, queues=["default"]), timeout=30)

    # Then the answer fits (the call itself would have failed otherwise), the claims
    # past its budget are refused UNAVAILABLE and left unclaimed ...
    assert reply.ByteSize() < 4 * 1024 * KIB
    claimed = [r.claim.run.run_id for r in reply.results if r.HasField("claim")]
    refused = [runs[i] for i, r in enumerate(reply.results) if r.HasField("error")]
    assert claimed and refused and len(claimed) + len(refused) == 30
    for result in reply.results:
        if result.HasField("error"):
            assert status_code(result.error.code) is grpc.StatusCode.UNAVAILABLE
            assert "answer is full" in result.error.message
    # ... and asked again, they are claimed in the next answers
    for _ in range(30):
        if not refused:
            break
        again = [api.ClaimRunRequest(run_id=r, worker_id="w1") for r in refused]
        reply = stub.ClaimRuns(api.ClaimRunsRequest(claims=again, queues=["default"]), timeout=30)
        claimed += [r.claim.run.run_id for r in reply.results if r.HasField("claim")]
        refused = [refused[i] for i, r in enumerate(reply.results) if r.HasField("error")]
    assert sorted(claimed) == sorted(runs)
    got = stub.GetRuns(api.GetRunsRequest(runs=[api.GetRunRequest(run_id=runs[0])])).runs
    assert got[0].state == pb.RUN_STATE_WAITING and got[0].attempt == 1


KEY = "k" * 16 + "0123456789abcdef"


def _claim(stub, run_id: str, worker: str, key: str) -> api.ClaimRunResponse:
    return claim_one(stub, api.ClaimRunRequest(run_id=run_id, worker_id=worker, claim_key=key))


def test_a_claim_asked_again_with_its_key_is_answered_with_the_attempt_it_started(stub):
    # Given a run claimed by w1 with a key, whose answer w1 never saw
    run = record_run(stub, create_schedule(stub).schedule_id).run
    first = _claim(stub, run.run_id, "w1", KEY)
    assert first.claimed

    # When w1 asks again with the same key
    again = _claim(stub, run.run_id, "w1", KEY)

    # Then it gets the same attempt, and no other attempt was started
    assert again.claimed and again.attempt_token == first.attempt_token
    assert again.run.attempt == 1
    got = get_one(stub, run.run_id)
    assert got.state == pb.RUN_STATE_WAITING and got.attempt == 1
    kinds = [e.kind for e in stub.ListRunEvents(api.ListRunEventsRequest(run_id=run.run_id)).events]
    assert kinds.count("claimed") == 1, kinds


def test_a_held_run_is_refused_to_another_key_another_worker_and_once_its_body_began(stub):
    # Given a run claimed by w1 with a key
    run = record_run(stub, create_schedule(stub).schedule_id).run
    first = _claim(stub, run.run_id, "w1", KEY)

    # Then a claim with another key, no key, or the key from another worker is refused
    assert not _claim(stub, run.run_id, "w1", KEY[::-1]).claimed
    assert not _claim(stub, run.run_id, "w1", "").claimed
    assert not _claim(stub, run.run_id, "w2", KEY).claimed
    # and once the attempt's body began (the worker had its answer), so is the key's
    beat = api.HeartbeatRequest(run_id=run.run_id, attempt_token=first.attempt_token)
    beat.body_started_at.GetCurrentTime()
    stub.Heartbeats(api.HeartbeatsRequest(beats=[beat]))
    refused = _claim(stub, run.run_id, "w1", KEY)
    assert not refused.claimed and not refused.attempt_token
    assert get_one(stub, run.run_id).attempt == 1


@pytest.mark.parametrize("key", ["short", "x" * 65, "has space in it!!"])
def test_a_malformed_claim_key_is_refused_naming_the_item(stub, key):
    run = record_run(stub, create_schedule(stub).schedule_id).run
    error = rpc_error(_claim, stub, run.run_id, "w1", key)
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "claims[0].claim_key" in error.details() and "16 to 64" in error.details()
    assert get_one(stub, run.run_id).state == pb.RUN_STATE_PENDING
