"""DeadLetterRun as a worker's stolen certificate would call it, over real gRPC: only
the attempt that holds a run gives up on it; a poison message without an attempt is
listed and leaves its run as it is."""

from __future__ import annotations

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from tests.harness.store import claimed_run, create_schedule, record_run, rpc_error
from tests.harness.tls import caller_for
from tests.helpers import claim_one, get_one


def letters_of(stub, run_id: str) -> list[api.DeadLetter]:
    listed = stub.ListDeadLetters(api.ListDeadLettersRequest(limit=100)).dead_letters
    return [d for d in listed if d.run_id == run_id]


def test_a_run_nobody_claimed_cannot_be_dead_lettered(stub) -> None:
    # Given a PENDING run no worker was sent yet (the harness calls DeadLetterRun as a
    # worker)
    assert caller_for("/cronwave.v1.WorkflowStoreService/DeadLetterRun") == "worker"
    run = record_run(stub, create_schedule(stub).schedule_id).run

    # When a worker's certificate dead-letters it without an attempt token, and with a
    # made-up one
    bare = stub.DeadLetterRun(
        api.DeadLetterRunRequest(run_id=run.run_id, reason="retries_exhausted", error="x")
    )
    forged = rpc_error(
        stub.DeadLetterRun,
        api.DeadLetterRunRequest(
            run_id=run.run_id, attempt_token="a" * 32, reason="retries_exhausted"
        ),
    )

    # Then the run is still PENDING, and the next worker's claim takes it
    assert not bare.changed and bare.run.state == pb.RUN_STATE_PENDING
    assert forged.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert forged.details().startswith(
        f"attempt_token: not the current attempt of run '{run.run_id}'"
    )
    assert get_one(stub, run.run_id).state == pb.RUN_STATE_PENDING
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"))
    assert claim.claimed and claim.run.attempt == 1
    # and the message without an attempt is listed as it came, naming the run
    [letter] = letters_of(stub, run.run_id)
    assert bare.dead_letter == letter and letter.reason == "retries_exhausted"


def test_the_attempt_that_holds_a_run_dead_letters_it(stub) -> None:
    # Given a run a worker claimed
    run, token = claimed_run(stub)

    # When that attempt gives up on it
    done = stub.DeadLetterRun(
        api.DeadLetterRunRequest(
            run_id=run.run_id, attempt_token=token, reason="unknown_job_type", error="no job"
        )
    )

    # Then the run is dead-lettered and listed
    assert done.changed and done.run.state == pb.RUN_STATE_DEAD_LETTERED
    assert [d.reason for d in letters_of(stub, run.run_id)] == ["unknown_job_type"]


def test_a_poison_message_naming_no_run_is_listed_on_its_own(stub) -> None:
    # When a worker dead-letters a message that names no run the store has
    poison = stub.DeadLetterRun(
        api.DeadLetterRunRequest(
            run_id="run_nowhere", reason="rejected", error="ActorNotFound", message_json="{}"
        )
    )

    # Then it is listed, with no run
    assert poison.changed and not poison.HasField("run")
    assert [d.reason for d in letters_of(stub, "run_nowhere")] == ["rejected"]
