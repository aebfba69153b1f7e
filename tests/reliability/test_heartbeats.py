"""A run whose heartbeat lapses is taken over by another worker and resumed from its
checkpoint; the attempt it superseded can no longer write."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime

import pytest

from tests.harness.cluster import MakeRig, Rig
from tests.helpers import eventually
from tests.reliability.jobs import HEARTBEAT_TIMEOUT
from tests.reliability.support import at, events_of

# A guarantee (exactly once, fencing, zombie attempts, catch-up, DST): both backends.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]


def checkpoint_step(rig: Rig, run_id: str) -> int:
    return int(json.loads(rig.run(run_id).checkpoint_json or "{}").get("step", 0))


def running_past_step(rig: Rig, run_id: str, step: int) -> str:
    """The worker running ``run_id`` once its checkpoint passed ``step``."""

    def check() -> str:
        run = rig.run(run_id)
        assert rig.state(run_id) == "RUNNING"
        assert checkpoint_step(rig, run_id) >= step
        return run.worker_id

    return eventually(check, timeout=30, what=f"run past step {step}")


def test_a_paused_worker_is_superseded_and_its_writes_are_refused(make_rig: MakeRig) -> None:
    # Given a run checkpointing its steps on one of two workers
    rig = make_rig(pools={"default": 2})
    schedule_id = rig.schedule("drill.steps", {"steps": 40, "step_seconds": 0.1})
    run_id = rig.start(schedule_id).run.run_id
    first = running_past_step(rig, run_id, 5)

    # When that worker and its job process are paused past the heartbeat timeout
    rig.signal_group(first, signal.SIGSTOP)
    paused_at = checkpoint_step(rig, run_id)

    # Then the other worker takes the run over as a new attempt
    taken = eventually(
        lambda: (run := rig.run(run_id)).attempt == 2 and run, timeout=20, what="attempt 2"
    )
    assert taken.worker_id != first

    # When the paused worker resumes while the new attempt is still running
    rig.signal_group(first, signal.SIGCONT)

    # Then the store refuses its writes (its attempt token was superseded) ...
    eventually(
        lambda: "not the current attempt of run" in rig.log(first),
        timeout=20,
        what="the paused worker's heartbeat refused",
    )
    # ... and the run completes once, by the new attempt, from the checkpoint
    done = rig.wait_state(run_id, "SUCCEEDED", timeout=30)
    result = json.loads(done.result_json)
    assert result["attempt"] == 2
    assert 5 <= paused_at <= result["resumed_from"] < 40
    events = rig.run_events(run_id)
    kinds = [e.kind for e in events]
    assert kinds.count("succeeded") == 1 and kinds.count("claimed") == 2
    requeued = events_of(events, "requeued")
    assert len(requeued) == 1 and requeued[0].detail.startswith("heartbeat_lapsed")
    # and the paused worker stopped its job process without completing the run
    eventually(
        lambda: "superseded by a newer attempt; not completing" in rig.log(first),
        timeout=20,
        what="the paused attempt given up",
    )
    after = rig.run(run_id)
    assert (after.state, after.attempt, after.result_json) == (
        done.state,
        2,
        done.result_json,
    )


def test_kill_9_of_a_worker_resumes_its_run_once_its_heartbeats_lapse(
    make_rig: MakeRig, record_property: pytest.RecordProperty
) -> None:
    # Given a run checkpointing every 50 ms on one of two workers
    rig = make_rig(pools={"default": 2})
    schedule_id = rig.schedule("drill.steps", {"steps": 200, "step_seconds": 0.05})
    run_id = rig.start(schedule_id).run.run_id
    first = running_past_step(rig, run_id, 10)

    # When that worker is killed with SIGKILL (its job process dies with it)
    os.kill(rig.suite.procs[first].pid, signal.SIGKILL)
    killed = datetime.now(UTC)
    killed_mono = time.monotonic()
    at_kill = checkpoint_step(rig, run_id)

    # Then another attempt resumes from the checkpoint and makes progress
    def progressed() -> float:
        run = rig.run(run_id)
        assert run.attempt == 2 and checkpoint_step(rig, run_id) > at_kill
        return time.monotonic() - killed_mono

    to_progress = eventually(progressed, timeout=30, interval=0.01, what="resumed progress")
    # because its heartbeats lapsed: the sweeper handed it out again, then it was claimed
    events = rig.run_events(run_id)
    kinds = [e.kind for e in events]
    first_claim, second_claim = (i for i, kind in enumerate(kinds) if kind == "claimed")
    between = [e.detail for e in events[first_claim:second_claim] if e.kind == "requeued"]
    assert [d for d in between if d.startswith("heartbeat_lapsed")], between
    claimed = events[second_claim]
    # (how soon after the kill is a figure, printed; not a bound on a shared machine)
    to_claim = (at(claimed) - killed).total_seconds()
    record_property("kill_to_claim_s", round(to_claim, 3))
    record_property("kill_to_progress_s", round(to_progress, 3))
    print(f"\nheartbeat timeout {HEARTBEAT_TIMEOUT.total_seconds()}s: kill -9 -> claimed "
          f"{to_claim:.3f}s, -> new checkpoint {to_progress:.3f}s")  # fmt: skip
    # And it completes from the checkpoint
    done = rig.wait_state(run_id, "SUCCEEDED", timeout=30)
    assert json.loads(done.result_json)["resumed_from"] >= at_kill
