"""The leading planner cut off from leader-election (its link blackholed by a TCP
proxy): it stops leading on its own clock before its lease can expire, another planner
takes over once it has, its fires all come before the new leader's, and no slot runs
twice or goes missing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwave_core.convert import ts_to_dt
from tests.failover.support import LEASE_ENV, log_text
from tests.harness.planner import start_planner_process
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually

pytestmark = pytest.mark.slow


def test_a_cut_off_leader_stops_firing_before_another_takes_over(
    make_suite: SuiteFactory, drill_of, proxy_to
) -> None:
    # Given a leader that reaches leader-election only through a proxy, a second
    # planner that reaches it directly, and a 1-second schedule
    suite = make_suite(planners=0, env=LEASE_ENV)
    drill = drill_of(suite)
    proxy = proxy_to(suite.leader_addr)
    first = start_planner_process(suite, 0, {"CRONWAVE_LEADER_ADDR": proxy.address}).name
    drill.create_schedule()
    leader, old_token = drill.wait_leading(30)
    assert leader == first and proxy.connections >= 1
    second = start_planner_process(suite, 1).name
    eventually(
        lambda: sum(r.fencing_token == old_token for r in drill.runs(limit=20)) >= 2,
        timeout=10,
        what="two fires of the first leader",
    )

    # When its link to leader-election is blackholed
    proxy.blackhole()

    # Then another planner takes over, with a newer token, once the lease has expired
    taken = eventually(
        lambda: (held := drill.holder()) is not None and held[1] > old_token and held,
        timeout=30,
        interval=0.02,
        what="a takeover",
    )
    assert taken[0] == second
    # and by then the cut-off planner had stopped leading, on its own clock: the
    # validity it counts from each renewal's sending ends a safety margin before the
    # lease can (no renewal was refused: none reached leader-election)
    status = eventually(lambda: drill.status(first), timeout=10, what="the cut-off planner")
    assert not status.leader
    log = log_text(drill, first)
    assert "lost the lease" in log and "validity ran out before a renewal succeeded" in log

    # And it stopped firing before the new leader's first fire (the store's own clock)
    eventually(
        lambda: any(r.fencing_token > old_token for r in drill.runs(limit=20)),
        timeout=30,
        what="a fire by the new leader",
    )
    runs = drill.runs()
    old = [ts_to_dt(r.created_at) for r in runs if r.fencing_token == old_token]
    new = [ts_to_dt(r.created_at) for r in runs if r.fencing_token > old_token]
    assert max(old) < min(new)

    # And every slot has exactly one run, whose job ran once; nothing was refused
    accounts = drill.finish(datetime.now(UTC))
    assert accounts["audit"]["duplicate_runs"] == 0
    assert accounts["job_body_ran_twice"] == 0
    assert accounts["missed_fires"] == 0
    assert accounts["refused_stale"] == 0
    assert proxy.swallowed > 0
