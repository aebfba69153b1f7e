"""A zombie's completion: a worker paused after its job body returned, before it
completed, wakes while a newer attempt runs the run. Its completion is refused, and
nothing it reports is kept. A worker paused and resumed before anyone took over
completes the run itself. Either way the completion is settled within seconds of the
resume, and the pause is checked to hold (every thread of the worker's group stopped)
for as long as the test relies on it."""

from __future__ import annotations

import json
import signal

import pytest

from tests.harness.cluster import MakeRig, Rig
from tests.helpers import eventually
from tests.reliability.jobs import HEARTBEAT_TIMEOUT
from tests.reliability.support import events_of

# A guarantee (exactly once, fencing, zombie attempts, catch-up, DST): both backends.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

_DRILL = {"CRONWAVE_TEST_HOOKS": "1", "CRONWAVE_FAULT": "worker.stop_before_complete=1"}
#: How long a takeover may take once attempt 1's heartbeat lapsed: the lapse itself, the
#: dispatcher's next sweep, a pickup and the successor's first steps, on a loaded machine.
TAKEOVER = 20 * HEARTBEAT_TIMEOUT.total_seconds()
#: How long a resumed worker may take to settle its completion (sent, or refused).
SETTLE = 20.0


def paused_worker(rig: Rig) -> str:
    """The worker whose drill paused it, once every thread of its group has stopped."""

    def stopped() -> str:
        names = [n for n in rig.suite.procs if n.startswith("worker")]
        found = [n for n in names if "stopping this worker before completing" in rig.log(n)]
        assert found, "no worker has stopped yet"
        assert rig.group_stopped(found[0]), f"{found[0]} is not stopped yet"
        return found[0]

    return eventually(stopped, timeout=30, what="attempt 1's worker stopped before completing")


def test_a_paused_attempts_completion_is_refused_while_its_successor_runs(
    make_rig: MakeRig,
) -> None:
    # Given two workers, each stopping itself (SIGSTOP of its process group) once an
    # attempt 1 has returned from its body and before completing it
    rig = make_rig(pools={"default": 2}, env=_DRILL)
    payload = {"first_steps": 3, "steps": 40, "step_seconds": 0.1}
    run_id = rig.start(rig.schedule("drill.zombie", payload)).run.run_id

    # When attempt 1's body has returned and its worker stopped before completing ...
    zombie = paused_worker(rig)

    # ... another worker takes the run over once the heartbeat lapsed, and runs it
    def successor_running() -> bool:
        run = rig.run(run_id)
        step = int(json.loads(run.checkpoint_json or "{}").get("step", 0))
        return rig.state(run_id) == "RUNNING" and run.attempt == 2 and step > 3

    eventually(successor_running, timeout=TAKEOVER, what="attempt 2 running past attempt 1's work")
    # ... and the zombie, stopped all along, wakes while attempt 2 is still running
    assert rig.group_stopped(zombie), "the pause did not hold"
    rig.signal_group(zombie, signal.SIGCONT)

    # Then the zombie's completion reaches the store and is refused ...
    eventually(
        lambda: "completion refused: attempt_token: not the current attempt" in rig.log(zombie),
        timeout=SETTLE,
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


def test_a_worker_resumed_before_a_takeover_settles_its_completion_within_seconds(
    make_rig: MakeRig,
) -> None:
    # Given one worker that stops itself before completing attempt 1
    rig = make_rig(pools={"default": 1}, env=_DRILL)
    payload = {"first_steps": 3, "steps": 3, "step_seconds": 0.1}
    run_id = rig.start(rig.schedule("drill.zombie", payload)).run.run_id
    worker = paused_worker(rig)

    # When it is resumed, with no other worker to take the run over
    rig.signal_group(worker, signal.SIGCONT)

    # Then within seconds the run is settled, never left RUNNING: attempt 1's
    # completion lands, or (its heartbeat having lapsed meanwhile) it is refused and
    # the run is resumed and completed by the next attempt
    done = rig.wait_state(run_id, "SUCCEEDED", timeout=SETTLE + TAKEOVER)
    log = rig.log(worker)
    assert "resumed after" in log
    refused = "completion refused" in log
    assert done.attempt == (2 if refused else 1)
    assert len(events_of(rig.run_events(run_id), "succeeded")) == 1
