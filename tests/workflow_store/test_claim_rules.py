"""ClaimRuns as a worker's stolen certificate would call it, over real gRPC and TLS: a
claim is accepted only for a run enqueued to a queue the claiming worker consumes, and
only once the run has a message on that queue (``workflow_store.claim_rules``)."""

from __future__ import annotations

from datetime import timedelta

import grpc
from cronwave_proto.v1 import common_pb2 as pb
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts, td_to_duration
from tests.harness.store import (
    FIRE,
    claimed_run,
    create_schedule,
    record_run,
    register_job_type,
    rpc_error,
)
from tests.harness.tls import caller_for
from tests.helpers import claim_one, complete_one, fresh, get_one, record_one

CLAIM_RUNS = "/cronwave.v1.WorkflowStoreService/ClaimRuns"


def claim_result(stub, run_id: str, queues: list[str]) -> api.ClaimRunResult:
    """The one result of a worker's ClaimRuns of ``run_id``, naming ``queues``."""
    request = api.ClaimRunsRequest(
        claims=[api.ClaimRunRequest(run_id=run_id, worker_id="thief")], queues=queues
    )
    (result,) = stub.ClaimRuns(request).results
    return result


def resend(stub) -> dict[str, str]:
    """The dispatcher's sweep: the runs it sends a message now, with why."""
    reply = stub.RequeueStalledRuns(
        api.RequeueStalledRunsRequest(pending_for=td_to_duration(timedelta(0)), limit=1000)
    )
    return {stalled.run.run_id: stalled.reason for stalled in reply.runs}


def test_a_worker_cannot_claim_a_run_enqueued_to_a_queue_it_does_not_consume(stub) -> None:
    # Given a run enqueued to queue `billing-…` (the harness claims as a worker)
    assert caller_for(CLAIM_RUNS) == "worker"
    queue = fresh("billing")
    job = register_job_type(stub, queue=queue)
    run = record_run(stub, create_schedule(stub, job).schedule_id).run
    assert run.queue == queue

    # When a worker's certificate claims it, naming the queues it consumes
    refused = claim_result(stub, run.run_id, ["default", "bulk"])

    # Then the claim is refused, naming the field and the rule, and answers nothing of
    # the run
    assert not refused.HasField("claim")
    assert refused.error.code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert refused.error.kind.reason == "QUEUE_NOT_SERVED"
    assert refused.error.kind.metadata["field"] == "queues"
    assert refused.error.message.startswith(
        f"queues: run '{run.run_id}' was enqueued to queue '{queue}', which this worker "
        "does not consume (it named ['bulk', 'default'])"
    )
    # and no attempt started: a made-up completion is refused, the run is as it was
    forged = rpc_error(
        complete_one,
        stub,
        api.CompleteRunRequest(
            run_id=run.run_id,
            attempt_token="a" * 32,
            state=pb.RUN_STATE_SUCCEEDED,
            result_json='{"charged": 0}',
        ),
    )
    assert forged.code() == grpc.StatusCode.FAILED_PRECONDITION
    after = get_one(stub, run.run_id)
    assert (after.state, after.attempt, after.worker_id) == (pb.RUN_STATE_PENDING, 0, "")

    # When a worker of its queue claims it
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w1"), queues=[queue])

    # Then it holds the run
    assert claim.claimed and claim.attempt_token and claim.run.worker_id == "w1"


def test_a_run_recorded_without_a_message_is_claimed_only_once_one_is_sent(stub) -> None:
    # Given a run recorded without a message (enqueue unset: nobody queued it)
    schedule_id = create_schedule(stub).schedule_id
    recorded = record_one(
        stub,
        api.RecordRunRequest(schedule_id=schedule_id, fire_time=dt_to_ts(FIRE), fencing_token=1),
    )
    run_id = recorded.run.run_id

    # When a worker of its queue claims it by its id
    refused = claim_result(stub, run_id, ["default"])

    # Then the claim is refused: the run has no message a worker could have been given
    assert refused.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert refused.error.kind.reason == "RUN_NOT_ENQUEUED"
    assert refused.error.kind.metadata["field"] == "run_id"
    assert refused.error.message.startswith(
        f"run_id: run '{run_id}' has no message on any queue yet"
    )
    assert get_one(stub, run_id).attempt == 0

    # When the dispatcher's sweep sends its message (at once: it never had one)
    assert resend(stub).get(run_id) == "not_picked_up"

    # Then a worker of its queue claims it
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run_id, worker_id="w1"))
    assert claim.claimed and claim.run.attempt == 1


def test_a_replayed_run_is_claimed_only_once_its_new_message_is_sent(stub) -> None:
    # Given a run that was dead-lettered by its attempt, then replayed by an operator
    run, token = claimed_run(stub)
    stub.DeadLetterRun(
        api.DeadLetterRunRequest(run_id=run.run_id, attempt_token=token, reason="rejected")
    )
    stub.ReplayDeadLetter(api.ReplayDeadLetterRequest(run_id=run.run_id))

    # When a worker claims it before the sweep sent it a message (with the old one, say)
    refused = claim_result(stub, run.run_id, ["default"])

    # Then the claim is refused, and the run waits for its message
    assert refused.error.kind.reason == "RUN_NOT_ENQUEUED"
    assert get_one(stub, run.run_id).state == pb.RUN_STATE_PENDING

    # When the sweep sends it
    assert resend(stub).get(run.run_id) == "replayed"

    # Then a worker of its queue claims it, as a new attempt
    claim = claim_one(stub, api.ClaimRunRequest(run_id=run.run_id, worker_id="w2"))
    assert claim.claimed and claim.run.attempt == 2


def test_a_claim_names_the_queues_its_worker_consumes(stub) -> None:
    run = record_run(stub, create_schedule(stub).schedule_id).run
    item = api.ClaimRunRequest(run_id=run.run_id, worker_id="w1")

    # When a claim names no queue, or a malformed one
    bare = rpc_error(stub.ClaimRuns, api.ClaimRunsRequest(claims=[item]))
    bad = rpc_error(stub.ClaimRuns, api.ClaimRunsRequest(claims=[item], queues=["ok", "no queue"]))

    # Then it is refused whole, naming the field, and the run is left as it was
    assert bare.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bare.details().startswith("queues: required: the queues this worker consumes")
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bad.details().startswith("queues[1]: ")
    assert get_one(stub, run.run_id).attempt == 0
