"""A zombie's completion: a worker paused after its job body returned, before it
completed, wakes while a newer attempt runs the run. Its completion is refused, and
nothing it reports is kept."""

from __future__ import annotations

import json
import signal

import pytest

from tests.harness.cluster import MakeRig
from tests.helpers import eventually
from tests.reliability.support import events_of

# A guarantee (exactly once, fencing, zombie attempts, catch-up, DST): both backends.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]


def test_a_paused_attempts_completion_is_refused_while_its_successor_runs(
    make_rig: MakeRig,
) -> None:
    # Given two workers, each stopping itself (SIGSTOP of its process group) once an
    # attempt 1 has returned from its body and before completing it
    rig = make_rig(
        pools={"default": 2},
        env={"CRONWAVE_TEST_HOOKS": "1", "CRONWAVE_FAULT": "worker.stop_before_complete=1"},
    )
    payload = {"first_steps": 3, "steps": 40, "step_seconds": 0.1}
    run_id = rig.start(rig.schedule("drill.zombie", payload)).run.run_id

    # When attempt 1's body has returned and its worker stopped before completing ...
    def stopped_worker() -> str:
        names = [n for n in rig.suite.procs if n.startswith("worker")]
        found = [n for n in names if "stopping this worker before completing" in rig.log(n)]
        assert found, "no worker has stopped yet"
        return found[0]

    zombie = eventually(stopped_worker, timeout=30, what="attempt 1 stopped before completing")

    # ... another worker takes the run over once the heartbeat lapsed, and runs it
    def successor_running() -> bool:
        run = rig.run(run_id)
        step = int(json.loads(run.checkpoint_json or "{}").get("step", 0))
        return rig.state(run_id) == "RUNNING" and run.attempt == 2 and step > 3

    # Bounded generously: the successor waits for the paused attempt's lease to lapse,
    # which a saturated machine (a whole `make test` on two cores) stretches
    eventually(successor_running, timeout=120, what="attempt 2 running past attempt 1's work")
    # ... and the zombie wakes while attempt 2 is still running
    rig.signal_group(zombie, signal.SIGCONT)

    # Then the zombie's completion reaches the store and is refused ...
    eventually(
        lambda: "completion refused: attempt_token: not the current attempt" in rig.log(zombie),
        timeout=20,
        what="the zombie's completion refused",
    )
    assert rig.state(run_id) == "RUNNING"  # its completion changed nothing
    # ... and the run succeeds once, with attempt 2's result, not the zombie's
    done = rig.wait_state(run_id, "SUCCEEDED", timeout=30)
    result = json.loads(done.result_json)
    assert (result["attempt"], result["resumed_from"], result["last_step"]) == (2, 3, 40)
    events = rig.run_events(run_id)
    assert len(events_of(events, "succeeded")) == 1
    assert len(events_of(events, "claimed")) == 2
