"""The worker's claim (``worker.middleware.claim``): it names the queues the worker
consumes, and a message the store will not let it claim (another queue's run, or a run
whose message this is not) is skipped, not dead-lettered."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.errors import (
    ConfigurationError,
    CronwaveError,
    QueueNotServed,
    RunNotEnqueued,
)
from cronwave_core.queueing import RunMessage
from cronwave_core.settings import TestHooks
from cronwave_core.status import item_error
from worker.chain import Delivery, Skip
from worker.draining import AttemptStop
from worker.drills import ClaimAnswerLost, drill_channel
from worker.jobs import Registry, builtin_job_types
from worker.middleware.claim import Claim

FIRE = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)


class RefusingStore:
    """A store that refuses every claim with ``error``, and keeps what it was asked."""

    def __init__(self, error: CronwaveError) -> None:
        self.error = error
        self.requests: list[store_pb.ClaimRunsRequest] = []

    def ClaimRuns(self, request: store_pb.ClaimRunsRequest) -> store_pb.ClaimRunsResponse:
        self.requests.append(request)
        refusal = store_pb.ClaimRunResult(error=item_error(self.error))
        return store_pb.ClaimRunsResponse(results=[refusal for _ in request.claims])


def delivery(queue: str) -> Delivery:
    message = RunMessage(
        run_id="run-1", schedule_id="nightly", fire_time=FIRE, job_type="cronwave.noop",
        queue=queue,
    )  # fmt: skip
    return Delivery(message, AttemptStop("run-1"))


@pytest.mark.parametrize(
    "error",
    [QueueNotServed("run-1", "billing", ["critical", "default"]), RunNotEnqueued("run-1")],
    ids=["another-queue", "no-message"],
)
def test_a_claim_names_the_worker_queues_and_skips_a_stray_message(error: CronwaveError) -> None:
    # Given a worker of the queues critical and default, whose store refuses the claim
    store = RefusingStore(error)
    claim = Claim(store, Registry(builtin_job_types()), "w-1", ["critical", "default"])
    stray = delivery("default")
    try:
        # When a message comes
        with pytest.raises(Skip):
            claim.before_claim(stray)
    finally:
        claim.close()
        stray.phase.close()

    # Then the claim named the worker's queues, and the message was skipped (acked,
    # nothing run, nothing dead-lettered)
    [request] = store.requests
    assert list(request.queues) == ["critical", "default"]
    assert [c.run_id for c in request.claims] == ["run-1"]
    assert not stray.attempt_token and not stray.run.run_id


class LosingStore:
    """A store whose first claim answer is lost (as if its deadline passed after the
    store committed it), then answers every claim as claimed; keeps what it was asked."""

    def __init__(self) -> None:
        self.requests: list[store_pb.ClaimRunsRequest] = []

    def ClaimRuns(self, request: store_pb.ClaimRunsRequest) -> store_pb.ClaimRunsResponse:
        self.requests.append(request)
        if len(self.requests) == 1:
            raise ClaimAnswerLost()
        claimed = store_pb.ClaimRunResponse(claimed=True, attempt_token="a" * 32)
        claimed.run.run_id = "run-1"
        return store_pb.ClaimRunsResponse(
            results=[store_pb.ClaimRunResult(claim=claimed) for _ in request.claims]
        )


def test_a_claim_whose_answer_was_lost_is_asked_again_with_its_key() -> None:
    # Given a worker whose first claim answer is lost
    store = LosingStore()
    claim = Claim(store, Registry(builtin_job_types()), "w-1", ["default"])
    first, second = delivery("default"), delivery("default")
    try:
        # When a message comes, and then another
        claim.before_claim(first)
        claim.before_claim(second)
    finally:
        claim.close()
        first.phase.close()
        second.phase.close()

    # Then the first claim was asked again with its own key and got its attempt, and
    # the next message's claim has a key of its own
    keys = [request.claims[0].claim_key for request in store.requests]
    assert len(keys) == 3 and keys[0] == keys[1] != keys[2]
    assert all(len(key) == 32 and int(key, 16) >= 0 for key in keys)
    assert first.attempt_token == "a" * 32


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_the_lost_answers_drill_refuses_a_count_that_is_not_one_or_more(value: str) -> None:
    hooks = TestHooks.from_env(
        {"CRONWAVE_TEST_HOOKS": "1", "CRONWAVE_FAULT": f"worker.lose_claim_answers={value}"}
    )
    with pytest.raises(ConfigurationError, match=r"worker\.lose_claim_answers expects a count"):
        drill_channel(hooks, grpc.insecure_channel("127.0.0.1:1"))


def test_without_the_test_hooks_the_channel_is_left_as_it_is() -> None:
    channel = grpc.insecure_channel("127.0.0.1:1")
    assert drill_channel(TestHooks.from_env({}), channel) is channel
