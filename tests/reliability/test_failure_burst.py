"""A thousand runs of one job type failing at once: every run reaches the end its retry
policy gives it (one retry then FAILED, or dead-lettered with no retry), and no
worker's consumer dies, restarts or runs out of connections (its pools are sized to
its threads: ``cronwave_core.redis_pools``, docs/operations/deployment.md)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave_core.convert import dt_to_ts
from tests.harness.cluster import TERMINAL, MakeRig, Rig
from tests.helpers import eventually

pytestmark = pytest.mark.slow

RETRIED = 1_000  # runs of drill.burst_retried: one retry, then FAILED
UNRETRIED = 200  # runs of drill.burst_unretried: no retry, dead-lettered
#: What the worker's log says when a consumer (a fetching thread) or a consumer's
#: worker thread dies or restarts (dramatiq.worker), or a pool ran dry
#: (cronwave_core.redis_pools, and the acknowledgement consumer's "Redis unreachable").
TROUBLE = (
    "Consumer encountered",
    "Restarting consumer",
    "Exception in thread",
    "RedisPoolExhausted",
    "Redis pool '",
    "Redis unreachable",
)
BATCH = 500  # starts per StartRuns call


def start_burst(rig: Rig, schedule_id: str, count: int) -> list[str]:
    """``count`` runs of ``schedule_id``, all due now (a microsecond apart)."""
    base = datetime.now(UTC) - timedelta(seconds=1)
    run_ids: list[str] = []
    for first in range(0, count, BATCH):
        starts = [
            dispatcher_pb.StartRunRequest(
                schedule_id=schedule_id,
                fire_time=dt_to_ts(base + timedelta(microseconds=i)),
                fencing_token=1,
            )
            for i in range(first, min(first + BATCH, count))
        ]
        reply = rig.dispatcher.StartRuns(dispatcher_pb.StartRunsRequest(starts=starts), timeout=60)
        for result in reply.results:
            assert not result.HasField("error"), result.error
            run_ids.append(result.started.run.run_id)
    assert len(set(run_ids)) == count
    return run_ids


def runs_of(rig: Rig, schedule_id: str) -> list[common_pb2.Run]:
    reply = rig.store.ListRuns(
        store_pb.ListRunsRequest(schedule_id=schedule_id, limit=5_000, lean=True), timeout=30
    )
    return list(reply.runs)


def all_ended(rig: Rig, schedule_id: str, count: int) -> list[common_pb2.Run]:
    def check() -> list[common_pb2.Run]:
        runs = runs_of(rig, schedule_id)
        states = Counter(common_pb2.RunState.Name(r.state) for r in runs)
        assert len(runs) == count and all(r.state in TERMINAL for r in runs), states
        return runs

    return eventually(check, timeout=240, interval=1.0, what=f"{count} runs of {schedule_id} ended")


def test_a_thousand_failing_runs_end_as_their_policy_says_with_no_consumer_restart(
    make_rig: MakeRig,
) -> None:
    # Given two workers with the default 64 consumer threads each and pools sized to
    # them, bodies in threads (in job processes, the default, this test took 58 s
    # against 50 s, and 117 s on a loaded machine; what the default adds, a burst's
    # lost claim answers, is the next test's), and two failing job types
    rig = make_rig(pools={"default": 2}, env={"CRONWAVE_JOB_ISOLATION": "thread"})
    workers = [name for name in rig.suite.procs if name.startswith("worker")]
    assert len(workers) == 2, workers
    pids = {name: rig.suite.procs[name].pid for name in workers}
    retried = rig.schedule("drill.burst_retried")
    unretried = rig.schedule("drill.burst_unretried")

    # When 1,200 runs are started at once, every one of them failing
    start_burst(rig, retried, RETRIED)
    start_burst(rig, unretried, UNRETRIED)

    # Then each run with one retry was tried twice and ended FAILED on its second
    # attempt's non-retryable error
    runs = all_ended(rig, retried, RETRIED)
    outcomes = Counter((common_pb2.RunState.Name(r.state), r.attempt, r.error) for r in runs)
    assert outcomes == {("RUN_STATE_FAILED", 2, "Declined: attempt 2 declined"): RETRIED}
    # and each run with no retry was dead-lettered after its one attempt
    runs = all_ended(rig, unretried, UNRETRIED)
    outcomes = Counter((common_pb2.RunState.Name(r.state), r.attempt) for r in runs)
    odd = [r.run_id for r in runs if r.attempt != 1][:3]
    histories = {run_id: [(e.kind, e.detail) for e in rig.run_events(run_id)] for run_id in odd}
    assert outcomes == {("RUN_STATE_DEAD_LETTERED", 1): UNRETRIED}, histories
    letters = {d.run_id: d for d in rig.dead_letters() if d.job_type == "drill.burst_unretried"}
    assert all(d.reason == "retries_exhausted" for d in letters.values())
    # and a sample's history shows the retry: two claims, the second after the failure
    for run in runs_of(rig, retried)[:: RETRIED // 10]:
        kinds = [e.kind for e in rig.run_events(run.run_id) if e.kind != "started"]
        assert kinds.count("claimed") == 2 and kinds[-1] == "failed", kinds

    # and no worker restarted, nor did any consumer die, restart or wait out a pool
    assert {name: rig.suite.procs[name].pid for name in workers} == pids
    for name in workers:
        assert rig.suite.procs[name].alive(), name
        log = rig.log(name)
        found = [line for line in log.splitlines() if any(t in line for t in TROUBLE)]
        assert not found, f"{name}: {found[:5]}"


#: The worker drops the answers of its first ClaimRuns calls that claimed a run, once
#: the store has committed them (worker.drills), as a deadline passing on a busy store
#: does; the jobs run in job processes, as by default.
_LOST_ANSWERS = {"CRONWAVE_TEST_HOOKS": "1", "CRONWAVE_FAULT": "worker.lose_claim_answers=2"}
LOST_RUNS = 20


def test_a_claim_whose_answer_was_lost_runs_its_attempt_and_no_other(make_rig: MakeRig) -> None:
    # Given a worker with job processes (the default) whose first two claim answers
    # are lost after the store committed them, and a job type with no retry
    rig = make_rig(pools={"default": 1}, env=_LOST_ANSWERS)
    schedule_id = rig.schedule("drill.once")

    # When runs of it are started at once, each failing
    start_burst(rig, schedule_id, LOST_RUNS)
    runs = all_ended(rig, schedule_id, LOST_RUNS)

    # Then answers were lost (the drill acted on some of these runs) ...
    (worker,) = [name for name in rig.suite.procs if name.startswith("worker")]
    dropped = [line for line in rig.log(worker).splitlines() if "worker.lose_claim_answers" in line]
    assert dropped and any(r.run_id in "".join(dropped) for r in runs), dropped
    # ... and each run was dead-lettered after its one attempt, whose claim was asked
    # again and answered, not taken over by a second attempt once its heartbeat lapsed
    outcomes = Counter((common_pb2.RunState.Name(r.state), r.attempt) for r in runs)
    odd = [r.run_id for r in runs if r.attempt != 1][:3]
    histories = {run_id: [(e.kind, e.detail) for e in rig.run_events(run_id)] for run_id in odd}
    assert outcomes == {("RUN_STATE_DEAD_LETTERED", 1): LOST_RUNS}, histories
    for run in runs:
        kinds = [e.kind for e in rig.run_events(run.run_id)]
        assert kinds.count("claimed") == 1 and kinds.count("started") == 1, kinds
        assert "requeued" not in kinds[kinds.index("claimed") :], kinds  # no lapse
        assert kinds[-1] == "dead_lettered", kinds
