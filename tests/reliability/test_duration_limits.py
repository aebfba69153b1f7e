"""A job that overruns its duration limit is killed, even in a busy loop or a blocking
system call, marked TIMED_OUT, and its worker slot runs the next job. (How soon past the
limit the kill lands depends on the machine; it is not a bound here.) The three kinds of
runaway take turns on one rig (``shared_rig``): each leaves its slot free and one warm
job process, as it found them."""

from __future__ import annotations

import pytest

from tests.harness.cluster import MakeRig
from tests.harness.processes import job_processes
from tests.helpers import eventually
from tests.reliability.jobs import RUNAWAY_LIMIT
from tests.reliability.support import at, events_of

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "job_type",
    [
        "drill.spin",  # a pure-Python busy loop
        "drill.block",  # time.sleep(3600): one blocking call in C
        "drill.stubborn",  # ignores SIGTERM, then blocks: only SIGKILL ends it
    ],
)
def test_a_runaway_job_is_killed_past_its_limit_and_frees_its_slot(
    shared_rig: MakeRig, job_type: str
) -> None:
    # Given a worker with one slot
    rig = shared_rig(env={"CRONWAVE_WORKER_THREADS": "1"})
    # When a job runs past its one-second limit (none of them ever ends by itself)
    run_id = rig.start(rig.schedule(job_type)).run.run_id
    run = rig.wait_state(run_id, "TIMED_OUT", timeout=60)
    # Then it was stopped, not before its limit, and marked TIMED_OUT
    assert run.error.startswith("DurationLimitExceeded: exceeded the duration limit of 1s")
    events = rig.run_events(run_id)
    took = at(events_of(events, "timed_out")[0]) - at(events_of(events, "claimed")[0])
    assert took >= RUNAWAY_LIMIT, took
    # and the slot is free: the next job runs
    after = rig.start(rig.schedule("cronwave.noop")).run.run_id
    rig.wait_state(after, "SUCCEEDED", timeout=60)
    # and the killed job process is gone: only the warm one is left
    eventually(lambda: len(job_processes(rig.namespace)) == 1, what="one job process left")
