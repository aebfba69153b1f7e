"""A ClaimRuns answer stays within every client's 4 MiB receive limit whatever the
claimed runs' payloads: past its budget, a batch's further claims are refused
UNAVAILABLE (not claimed, to be asked again), never answered with a message no client
reads (a worker claiming 30 runs with 250 KiB payloads at once dead-lettered them)."""

from __future__ import annotations

from datetime import timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.status import status_code
from tests.harness.store import FIRE, record_run, register_job_type, schedule_msg
from tests.helpers import fresh

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
