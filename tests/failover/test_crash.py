"""kill -9 of the leading planner just before a fire: the next leader fires that slot,
once. (How long the slot waits for it is the failover bench's figure, `make bench`.)"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2

from cronwave_core.convert import ts_to_dt
from tests.failover.support import LEASE_ENV
from tests.harness.suites import SuiteFactory
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
    time.sleep(max(0.0, (aim - datetime.now(UTC)).total_seconds()))  # aiming the kill
    drill.end(leader, graceful=False)

    # Then the next leader fires, with a newer token
    eventually(
        lambda: any(r.fencing_token > token for r in drill.runs(limit=20)),
        timeout=30,
        interval=0.02,
        what="a fire by the next leader",
    )
    # the slot the dead leader had not started first (the aimed one, or a later one when
    # a busy machine let the kill land late) among them
    started = [ts_to_dt(r.fire_time) for r in drill.runs(limit=20) if r.fencing_token == token]
    slot = max([slot - timedelta(seconds=1), *started]) + timedelta(seconds=1)

    def run_of_slot() -> common_pb2.Run | None:
        found = [r for r in drill.runs(limit=20) if ts_to_dt(r.fire_time) == slot]
        return found[0] if found else None

    run = eventually(run_of_slot, timeout=30, interval=0.02, what="the slot's run")
    assert run.fencing_token > token
    assert run.state != common_pb2.RUN_STATE_MISSED
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
