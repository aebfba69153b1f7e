"""A worker cut off mid-run by its link going down (``tests.harness.netns``): the
store hears no heartbeat from it, so once the job type's heartbeat timeout has passed
the run is re-sent and another worker runs it as attempt 2. The cut worker's body
goes on meanwhile and returns while the link is down; its completion, sent as the link
heals, reaches the store and is refused (a newer attempt owns the run), and the worker
serves again. The run succeeds once, with attempt 2's result."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from cronwave_core.suite_health import wait_healthy
from tests.failover.jobs import HEARTBEAT_TIMEOUT, gate_of, returned_of
from tests.harness.cluster import MakeRig, Rig
from tests.helpers import eventually

pytestmark = pytest.mark.slow

JOBS = {"CRONWAVE_JOB_MODULES": "tests.failover.jobs"}
#: How long a takeover may take once the heartbeat lapsed: the lapse, the dispatcher's
#: next sweep, a pickup and the body's first checkpoint, on a loaded machine.
TAKEOVER = 10 * HEARTBEAT_TIMEOUT.total_seconds()
REFUSED = "completion refused: attempt_token: not the current attempt"


def worker_env(name: str) -> dict[str, str]:
    return {"CRONWAVE_WORKER_QUEUES": "default", "CRONWAVE_WORKER_ID": name}


def running_attempt(rig: Rig, run_id: str, attempt: int) -> bool:
    """Whether the run is RUNNING on ``attempt``, whose body has checkpointed."""
    run = rig.run(run_id)
    checkpoint = json.loads(run.checkpoint_json or "{}")
    return rig.state(run_id) == "RUNNING" and run.attempt == checkpoint.get("attempt") == attempt


def test_a_worker_cut_off_mid_run_is_superseded_and_its_completion_refused(
    make_rig: MakeRig, netns, tmp_path: Path
) -> None:
    # Given a worker in a network namespace of its own, reaching the store and Redis
    # only across a veth link, running attempt 1 of a run whose body waits for a gate
    rig = make_rig(pools={"default": 0}, env=JOBS)
    link = netns(rig.suite)
    cut = link.start_service("worker", "worker-cut", worker_env("worker-cut"))
    gate = str(tmp_path / "gate")
    run_id = rig.start(rig.schedule("partition.gated", {"gate": gate})).run.run_id
    eventually(lambda: running_attempt(rig, run_id, 1), timeout=30, what="attempt 1 running")
    # and a second worker on loopback
    rig.suite.start_service(
        "worker", index=1, name="worker-other", extra_env=worker_env("worker-other")
    )

    # When its link goes down
    link.cut()
    assert link.link_states() == ("DOWN", "DOWN")

    # Then once its heartbeat has lapsed the run is re-sent and runs elsewhere
    eventually(lambda: running_attempt(rig, run_id, 2), timeout=TAKEOVER, what="attempt 2")
    run = rig.run(run_id)
    assert run.worker_id == "worker-other"
    # while the cut worker's body, out of reach of any refusal, goes on; it returns
    gate_of(gate, 1).touch()
    eventually(returned_of(gate, 1).exists, timeout=10, what="attempt 1's body returned")
    assert REFUSED not in rig.log(cut.name)  # nothing of it reached the store yet

    # When the link heals
    link.heal()
    assert link.link_states() == ("UP", "UP")

    # Then its completion reaches the store and is refused, and it serves again
    eventually(lambda: REFUSED in rig.log(cut.name), timeout=20, what="the refusal")
    wait_healthy(
        cut.address,
        timedelta(seconds=20),
        "cronwave.v1.WorkerService",
        alive=cut.alive,
        tls=rig.suite.tls(),
    )
    assert rig.state(run_id) == "RUNNING"  # the refused completion changed nothing

    # And the run succeeds once, with attempt 2's result
    gate_of(gate, 2).touch()
    done = rig.wait_state(run_id, "SUCCEEDED", timeout=30)
    assert (done.attempt, json.loads(done.result_json)) == (2, {"attempt": 2})
    events = [(e.kind, e.attempt, e.detail) for e in rig.run_events(run_id) if e.kind != "started"]
    assert [(kind, attempt) for kind, attempt, _ in events] == [
        ("recorded", 0),
        ("enqueued", 0),
        ("claimed", 1),
        ("requeued", 1),
        ("claimed", 2),
        ("succeeded", 2),
    ]
    assert events[2][2] == "worker-cut" and events[4][2] == "worker-other"
    assert events[3][2].startswith("heartbeat_lapsed: no heartbeat from worker-cut")
