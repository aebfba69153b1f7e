"""A leader paused (SIGSTOP) between its lease check and its start request, past its
lease: another planner takes over and fires the slot; when the first resumes, the
store refuses its late start for its stale fencing token, and the job runs once."""

from __future__ import annotations

import re
import signal
from datetime import UTC, datetime

import pytest
from cronwave_proto.v1 import common_pb2

from cronwave_bench.failover import STALE_MARKER
from cronwave_core.convert import ts_to_dt
from cronwave_core.settings import TEST_HOOKS
from tests.failover.support import LEASE_ENV, log_text
from tests.harness.planner import start_planner_process
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually

pytestmark = pytest.mark.slow

HOLD = 0.6  # seconds each start of the paused planner waits after its lease check
HELD = re.compile(r"holding the start of (\S+)@(\S+) \(fencing token (\d+)\)")


def test_a_paused_leader_late_start_is_refused_and_runs_nothing(
    make_suite: SuiteFactory, drill_of
) -> None:
    # Given a leader whose every start waits 0.6 s after its lease check (a GC pause
    # stand-in), a second planner, and a 1-second schedule
    suite = make_suite(planners=0, env=LEASE_ENV)
    drill = drill_of(suite)
    hold = {TEST_HOOKS: "1", "CRONWAVE_FAULT": f"planner.hold_start={HOLD}"}
    first = start_planner_process(suite, 0, hold).name
    drill.create_schedule()
    leader, old_token = drill.wait_leading(30)
    assert leader == first
    second = start_planner_process(suite, 1).name

    # When it is stopped inside a hold: its lease checked, its start not yet sent
    def caught_in_hold() -> tuple[datetime, int] | None:
        held = HELD.findall(log_text(drill, first))
        if len(held) <= seen:
            return None
        drill.suite.signal(first, signal.SIGSTOP)
        schedule_id, fire_time, token = held[-1]
        assert schedule_id == drill.schedule_id
        return datetime.fromisoformat(fire_time), int(token)

    seen = len(HELD.findall(log_text(drill, first)))
    slot, token = eventually(caught_in_hold, timeout=10, interval=0.01, what="a held start")
    assert token == old_token
    try:
        # ...and stays stopped past its lease, until the other planner has fired that slot
        def fired_by_successor() -> common_pb2.Run | None:
            runs = [r for r in drill.runs(limit=20) if ts_to_dt(r.fire_time) == slot]
            return runs[0] if runs else None

        run = eventually(fired_by_successor, timeout=15, interval=0.05, what="slot fired")
        assert run.fencing_token > old_token, "the paused planner's start got through"
        successor = drill.holder()
        assert successor == (second, run.fencing_token)
    finally:
        drill.suite.signal(first, signal.SIGCONT)

    # Then its late start is refused for the stale token, as its log says
    refusal = f"start of {drill.schedule_id}@{slot.isoformat()} {STALE_MARKER} {old_token}"
    eventually(lambda: refusal in log_text(drill, first), timeout=10, what="the refusal")
    status = drill.status(first)
    assert status is not None and not status.leader

    # And that refused start was not a fire the new leader missed: the slot has exactly
    # one run, by the new leader, and no job ran twice; no other slot was lost
    accounts = drill.finish(datetime.now(UTC))
    slot_runs = [r for r in drill.runs() if ts_to_dt(r.fire_time) == slot]
    assert [(r.fencing_token, r.state, r.attempt) for r in slot_runs] == [
        (run.fencing_token, common_pb2.RUN_STATE_SUCCEEDED, 1)
    ]
    assert accounts["refused_stale"] >= 1
    assert accounts["job_body_ran_twice"] == 0
    assert accounts["audit"]["duplicate_runs"] == 0
    assert accounts["missed_fires"] == 0
    assert all(f"token {old_token} is stale" in line for line in _refusals(drill, first))


def _refusals(drill, name: str) -> list[str]:
    return [line for line in log_text(drill, name).splitlines() if STALE_MARKER in line]
