"""A run's result and checkpoint are bounded (``CRONWAVE_MAX_RESULT_BYTES``,
``CRONWAVE_MAX_CHECKPOINT_BYTES``, 1 MiB each): the store refuses more before writing
anything, and a run holding both at their limits is still read, completed and swept
by clients that receive at most 4 MiB. Answers that need no blobs carry none."""

from __future__ import annotations

import json
from datetime import timedelta

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import td_to_duration
from cronwave_core.limits import DEFAULT_LIMITS, MIB
from tests.harness.store import (
    claimed_run,
    rpc_error,
)
from tests.helpers import claim_one, complete_one, eventually, get_one

LIMIT = DEFAULT_LIMITS.result_bytes


def _json_of(size: int) -> str:
    """A JSON object of exactly ``size`` bytes."""
    text = json.dumps({"blob": ""})
    return json.dumps({"blob": "x" * (size - len(text))})


def _succeed(run_id: str, token: str, result_json: str) -> api.CompleteRunRequest:
    return api.CompleteRunRequest(
        run_id=run_id, attempt_token=token, state=pb.RUN_STATE_SUCCEEDED, result_json=result_json
    )


def test_the_limits_are_1_mib_each() -> None:
    assert DEFAULT_LIMITS.result_bytes == DEFAULT_LIMITS.checkpoint_bytes == 1 * MIB


def test_a_result_over_the_limit_is_refused_by_name_and_nothing_is_written(stub):
    # Given a running run, and another in the same batch
    run, token = claimed_run(stub)
    other, other_token = claimed_run(stub)

    # When its worker completes it with a 5 MiB result
    err = rpc_error(
        stub.CompleteRuns,
        api.CompleteRunsRequest(
            completions=[
                _succeed(other.run_id, other_token, "{}"),
                _succeed(run.run_id, token, _json_of(5 * MIB)),
            ]
        ),
    )

    # Then the call is refused naming the field, the limit and the size
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == (
        f"completions[1].result_json: at most {LIMIT} bytes (CRONWAVE_MAX_RESULT_BYTES), "
        f"got {5 * MIB}"
    )
    # And nothing was written: both runs are still held (claimed, no body started), and
    # readable
    assert get_one(stub, run.run_id).state == pb.RUN_STATE_WAITING
    assert get_one(stub, other.run_id).state == pb.RUN_STATE_WAITING


def test_a_checkpoint_over_the_limit_is_refused_by_heartbeat_and_release(stub):
    # Given a running run with a checkpoint
    run, token = claimed_run(stub)
    stub.Heartbeat(
        api.HeartbeatRequest(run_id=run.run_id, attempt_token=token, checkpoint_json='{"i": 1}')
    )
    big = _json_of(5 * MIB)

    # When its attempt sends a 5 MiB checkpoint, by heartbeat or with its release
    beat = rpc_error(
        stub.Heartbeat,
        api.HeartbeatRequest(run_id=run.run_id, attempt_token=token, checkpoint_json=big),
    )
    release = rpc_error(
        stub.ReleaseRun,
        api.ReleaseRunRequest(
            run_id=run.run_id, attempt_token=token, checkpoint_json=big, reason="stop"
        ),
    )

    # Then both are refused naming the field, and the run keeps its checkpoint
    limit = DEFAULT_LIMITS.checkpoint_bytes
    for err in (beat, release):
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.details() == (
            f"checkpoint_json: at most {limit} bytes (CRONWAVE_MAX_CHECKPOINT_BYTES), got {5 * MIB}"
        )
    got = get_one(stub, run.run_id)
    assert (got.state, got.checkpoint_json) == (pb.RUN_STATE_WAITING, '{"i": 1}')


def test_a_run_with_result_and_checkpoint_at_the_limits_completes_and_reads(stub):
    # Given three running runs, each with a checkpoint at the limit
    at_limit = _json_of(DEFAULT_LIMITS.checkpoint_bytes)
    runs = [claimed_run(stub) for _ in range(3)]
    for run, token in runs:
        stub.Heartbeat(
            api.HeartbeatRequest(run_id=run.run_id, attempt_token=token, checkpoint_json=at_limit)
        )

    # When one batch completes all three, each with a result at the limit
    result = _json_of(LIMIT)
    answer = stub.CompleteRuns(
        api.CompleteRunsRequest(completions=[_succeed(r.run_id, t, result) for r, t in runs])
    )

    # Then the answer says what changed, and carries no blobs
    for got in answer.results:
        assert got.completion.changed
        assert got.completion.run.state == pb.RUN_STATE_SUCCEEDED
        assert got.completion.run.result_json == got.completion.run.checkpoint_json == ""
        assert got.completion.run.payload_json == ""
    # And each run reads back whole, with its result and checkpoint
    for run, _ in runs:
        stored = get_one(stub, run.run_id)
        assert (stored.result_json, stored.checkpoint_json) == (result, at_limit)


def test_a_lost_run_with_a_checkpoint_at_the_limit_is_swept_and_resumed_from_it(stub):
    # Given a run whose attempt saved a checkpoint at the limit and then died
    run, token = claimed_run(stub, heartbeat_timeout=timedelta(milliseconds=500))
    at_limit = _json_of(DEFAULT_LIMITS.checkpoint_bytes)
    stub.Heartbeat(
        api.HeartbeatRequest(run_id=run.run_id, attempt_token=token, checkpoint_json=at_limit)
    )

    # When the dispatcher's sweep asks for stalled runs once its heartbeat lapsed
    def swept() -> api.StalledRun:
        stalled = stub.RequeueStalledRuns(
            api.RequeueStalledRunsRequest(pending_for=td_to_duration(timedelta(seconds=1)))
        ).runs
        mine = [s for s in stalled if s.run.run_id == run.run_id]
        assert mine, "not swept yet"
        return mine[0]

    requeued = eventually(swept, timeout=20, what="the lost run requeued by the sweep")

    # Then the sweep answers it without its blobs, and the next claim resumes from it
    assert requeued.reason == "heartbeat_lapsed"
    assert requeued.run.checkpoint_json == requeued.run.payload_json == ""
    again = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w2"))
    assert again.claimed and again.run.checkpoint_json == at_limit


def test_completion_and_release_answers_carry_no_blobs(stub):
    # Given a running run with a checkpoint and another one to release
    run, token = claimed_run(stub)
    handed, handed_token = claimed_run(stub)

    # When one completes with a result and the other is released with a checkpoint
    done = complete_one(stub, _succeed(run.run_id, token, '{"n": 1}'))
    released = stub.ReleaseRun(
        api.ReleaseRunRequest(
            run_id=handed.run_id,
            attempt_token=handed_token,
            checkpoint_json='{"i": 2}',
            reason="stop",
        )
    )

    # Then the answers say what changed, without the blobs the store holds
    assert done.changed and done.run.state == pb.RUN_STATE_SUCCEEDED
    assert (done.run.result_json, done.run.payload_json) == ("", "")
    assert released.released and released.run.state == pb.RUN_STATE_PENDING
    assert released.run.checkpoint_json == ""
    assert get_one(stub, handed.run_id).checkpoint_json == '{"i": 2}'
    assert get_one(stub, run.run_id).result_json == '{"n": 1}'
