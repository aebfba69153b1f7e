"""kill -9 of the leading planner just before a fire: the next leader fires that slot,
once, within the lease TTL plus one retry."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from cronwave.v1 import common_pb2
from cronwave_core.convert import ts_to_dt
from tests.conftest import SuiteFactory
from tests.failover.support import LEASE_ENV, RETRY, TAKEOVER_WORK, TTL
from tests.helpers import eventually

pytestmark = pytest.mark.slow

BEFORE_FIRE = 0.15  # seconds between the kill and the start it prevents


def test_a_crashed_leader_slot_is_fired_once_by_the_next_leader(
    make_suite: SuiteFactory, drill_of
) -> None:
    # Given two planners, a 1-second schedule, and a leader whose fires are accepted
    suite = make_suite(planners=2, env=LEASE_ENV)
    drill = drill_of(suite)
    drill.create_schedule()
    leader, token = drill.wait_leading(30)

    # When the leader is killed 150 ms before it would start its next slot. It starts
    # a slot at a steady offset from the fire time (ahead of it, by the dispatch lead),
    # read off its accepted runs.
    def steady_runs() -> list[common_pb2.Run]:
        # The first run after the schedule's creation is not steady: its lead is cut
        # short by the creation, so it is left out.
        mine = [r for r in drill.runs(limit=10) if r.fencing_token == token]
        return mine[-2:] if len(mine) >= 3 else []

    mine = eventually(steady_runs, timeout=10, what="steady runs of the leader")
    offset = min(ts_to_dt(r.created_at) - ts_to_dt(r.fire_time) for r in mine)
    status = drill.status(leader)
    assert status is not None and status.leader
    slot = ts_to_dt(status.next_fire_time)
    aim = slot + offset - timedelta(seconds=BEFORE_FIRE)
    if (aim - datetime.now(UTC)).total_seconds() < 0.05:
        slot, aim = slot + timedelta(seconds=1), aim + timedelta(seconds=1)  # too close
    time.sleep((aim - datetime.now(UTC)).total_seconds())  # aiming the kill
    died_at = datetime.now(UTC)
    drill.end(leader, graceful=False)
    assert died_at - aim < timedelta(seconds=0.1), "the kill came too late to be aimed"

    # Then the slot is fired by the next leader, with a newer token, within TTL + a retry
    def run_of_slot() -> common_pb2.Run | None:
        found = [r for r in drill.runs(limit=20) if ts_to_dt(r.fire_time) == slot]
        return found[0] if found else None

    run = eventually(run_of_slot, timeout=15, interval=0.02, what="the slot's run")
    assert run.fencing_token > token
    assert run.state != common_pb2.RUN_STATE_MISSED
    failover = (ts_to_dt(run.created_at) - died_at).total_seconds()
    assert failover <= TTL + RETRY + TAKEOVER_WORK, f"fired {failover:.3f}s after the kill"
    successor = drill.holder()
    assert successor is not None and successor[0] != leader

    # And that slot, like every other, has exactly one run whose job ran once
    accounts = drill.finish(datetime.now(UTC))
    assert accounts["audit"]["duplicate_runs"] == 0
    assert accounts["job_body_ran_twice"] == 0
    assert accounts["missed_fires"] == 0
    assert accounts["refused_stale"] == 0
    slot_runs = [r for r in drill.runs() if ts_to_dt(r.fire_time) == slot]
    assert [(r.state, r.attempt) for r in slot_runs] == [(common_pb2.RUN_STATE_SUCCEEDED, 1)]
