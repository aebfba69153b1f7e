"""A worker holds at most ``CRONWAVE_WORKER_MAX_RUNS`` runs at once (claimed, not yet
completed): the runs of a crowded instant past that wait in their queue, unclaimed,
and each runs once when room is made."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from tests.harness.cluster import MakeRig, Rig
from tests.helpers import eventually
from tests.reliability.support import events_of

pytestmark = pytest.mark.slow

MAX_RUNS = 3
RUNS = 8


def test_a_worker_claims_no_more_runs_than_it_may_hold_and_runs_the_rest_once_room_is_made(
    make_rig: MakeRig,
) -> None:
    # Given one worker that may hold 3 runs, with more consumer threads than that
    rig = make_rig(
        pools={"default": 1},
        env={"CRONWAVE_WORKER_MAX_RUNS": str(MAX_RUNS), "CRONWAVE_WORKER_THREADS": "8"},
    )
    schedule = rig.schedule()

    # When 8 runs due 10 s from now are started (their messages at once)
    fire = datetime.now(UTC) + timedelta(seconds=10)
    run_ids = [
        rig.start(schedule, fire + timedelta(microseconds=i)).run.run_id for i in range(RUNS)
    ]

    # Then it claims 3 of them ahead and leaves the others PENDING: looked at for a
    # second after the third claim (the idle threads would claim the rest within a
    # poll of the broker), all before the runs are due
    eventually(
        lambda: len(_runs(rig, schedule, common_pb2.RUN_STATE_WAITING)) >= MAX_RUNS,
        timeout=7,
        what=f"{MAX_RUNS} runs claimed ahead",
    )
    for _ in range(5):
        waiting = _runs(rig, schedule, common_pb2.RUN_STATE_WAITING)
        pending = _runs(rig, schedule, common_pb2.RUN_STATE_PENDING)
        assert len(waiting) == MAX_RUNS, f"{len(waiting)} runs claimed ahead"
        assert len(pending) == RUNS - MAX_RUNS
        time.sleep(0.2)
    assert datetime.now(UTC) < fire, "the runs became due while they were looked at"

    # and once they are due, every run succeeds, each claimed once
    for run_id in run_ids:
        rig.wait_state(run_id, "SUCCEEDED", timeout=60)
        assert len(events_of(rig.run_events(run_id), "claimed")) == 1, run_id


def test_a_worker_stopped_while_its_threads_wait_for_room_hands_back_and_exits(
    make_rig: MakeRig,
) -> None:
    # Given a worker holding as many runs as it may, its other threads waiting for room
    rig = make_rig(
        pools={"default": 1},
        env={"CRONWAVE_WORKER_MAX_RUNS": "2", "CRONWAVE_WORKER_THREADS": "4"},
    )
    schedule = rig.schedule()
    fire = datetime.now(UTC) + timedelta(seconds=20)  # within the early limit (30 s)
    run_ids = [rig.start(schedule, fire + timedelta(microseconds=i)).run.run_id for i in range(6)]
    eventually(
        lambda: len(_runs(rig, schedule, common_pb2.RUN_STATE_WAITING)) == 2,
        timeout=20,
        what="two runs claimed",
    )
    [name] = [name for name in rig.suite.procs if name.startswith("worker")]
    worker = rig.suite.procs[name]
    assert worker.popen is not None

    # When it is asked to stop
    rig.suite.signal(name, signal.SIGTERM)

    # Then it exits 0 (no thread stays waiting), the two runs it held back in the store
    assert worker.popen.wait(timeout=30) == 0
    states = {run.run_id: run.state for run in _runs(rig, schedule)}
    assert set(states) == set(run_ids)
    assert set(states.values()) == {common_pb2.RUN_STATE_PENDING}, states
    released = [r for r in run_ids if "released" in [e.kind for e in rig.run_events(r)]]
    assert len(released) == 2, released


def _runs(rig: Rig, schedule_id: str, *states: common_pb2.RunState) -> list[common_pb2.Run]:
    """The schedule's runs, in ``states`` (none named: in any)."""
    request = store_pb.ListRunsRequest(schedule_id=schedule_id, states=states, limit=100)
    return list(rig.store.ListRuns(request, timeout=10).runs)
