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

BEFORE_FIRE = 0.15  # seconds between the kill and the slot it leaves unfired


def test_a_crashed_leader_slot_is_fired_once_by_the_next_leader(
    make_suite: SuiteFactory, drill_of
) -> None:
    # Given two planners, a 1-second schedule, and a leader whose fires are accepted
    suite = make_suite(planners=2, env=LEASE_ENV)
    drill = drill_of(suite)
    drill.create_schedule()
    leader, token = drill.wait_leading(30)

    # When the leader is killed 150 ms before its next slot is due
    status = drill.status(leader)
    assert status is not None and status.leader
    slot = ts_to_dt(status.next_fire_time)
    if (slot - datetime.now(UTC)).total_seconds() < BEFORE_FIRE + 0.05:
        slot += timedelta(seconds=1)  # too close to aim at: take the one after
    time.sleep((slot - datetime.now(UTC)).total_seconds() - BEFORE_FIRE)  # aiming the kill
    died_at = datetime.now(UTC)
    drill.end(leader, graceful=False)
    assert timedelta(seconds=0.05) < slot - died_at <= timedelta(seconds=BEFORE_FIRE + 0.05)

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
