"""An attempt that raises is retried after the job type's policy delay; a crash is
not a retry; a non-retryable error ends the run at once. The tests share one rig
(``shared_rig``): each reads only its own runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from tests.harness.cluster import MakeRig
from tests.reliability.jobs import SCALED_RETRY
from tests.reliability.support import at, events_of

pytestmark = pytest.mark.slow

#: The broker's delayed message, not the sweeper (bound: 2 s), brings each retry.
PROMPT = timedelta(seconds=1.5)


def test_retry_delays_follow_the_job_types_policy(shared_rig: MakeRig) -> None:
    # Given a job type whose policy is 0.2 s, x2, at most 4 attempts, and a job that
    # always fails
    rig = shared_rig()
    registered = {
        t.name: t
        for t in rig.store.ListJobTypes(store_pb.ListJobTypesRequest(), timeout=10).job_types
    }
    retry = registered["drill.flaky"].retry
    assert (retry.initial_interval.ToTimedelta(), retry.backoff_coefficient) == (
        timedelta(seconds=0.2),
        2.0,
    )
    assert (retry.maximum_attempts, list(retry.non_retryable_errors)) == (4, ["Declined"])

    # When it runs
    run_id = rig.start(rig.schedule("drill.flaky")).run.run_id
    rig.wait_state(run_id, "DEAD_LETTERED", timeout=30)

    # Then each retry was scheduled with the policy's delay ...
    events = rig.run_events(run_id)
    scheduled = events_of(events, "retry_scheduled")
    claimed = events_of(events, "claimed")
    assert [e.detail.split()[0] for e in scheduled] == [
        "retry_after=0.2s",
        "retry_after=0.4s",
        "retry_after=0.8s",
    ]
    assert [e.attempt for e in claimed] == [1, 2, 3, 4]
    # ... and the next attempt started no earlier than that delay, and promptly after it
    for k, failed in enumerate(scheduled):
        delay = SCALED_RETRY.delay(k + 1)
        waited = at(claimed[k + 1]) - at(failed)
        assert delay <= waited < delay + PROMPT, (k, waited)
    assert "requeued" not in [e.kind for e in events]


def test_a_non_retryable_error_fails_the_run_at_once(shared_rig: MakeRig) -> None:
    rig = shared_rig()
    run_id = rig.start(rig.schedule("drill.flaky", {"declined": True})).run.run_id
    run = rig.wait_state(run_id, "FAILED", timeout=20)
    assert run.error == "Declined: card declined" and run.attempt == 1
    kinds = [e.kind for e in rig.run_events(run_id)]
    assert "retry_scheduled" not in kinds and kinds[-1] == "failed"
    assert not [d for d in rig.dead_letters() if d.run_id == run_id]
