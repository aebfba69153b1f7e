"""The leading planner cut off from leader-election (its link blackholed by a TCP
proxy): it stops firing before its lease can expire, another planner takes over once
it has, and no slot runs twice or goes missing."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from cronwave_core.convert import ts_to_dt
from tests.conftest import SuiteFactory
from tests.failover.support import LEASE_ENV, log_text, start_planner
from tests.helpers import eventually

pytestmark = pytest.mark.slow


def test_a_cut_off_leader_stops_firing_before_its_lease_expires(
    make_suite: SuiteFactory, drill_of, proxy_to
) -> None:
    # Given a leader that reaches leader-election only through a proxy, a second
    # planner that reaches it directly, and a 1-second schedule
    suite = make_suite(planners=0, env=LEASE_ENV)
    drill = drill_of(suite)
    proxy = proxy_to(suite.leader_addr)
    first = start_planner(suite, 0, {"CRONWAVE_LEADER_ADDR": proxy.address}).name
    drill.create_schedule()
    leader, old_token = drill.wait_leading(30)
    assert leader == first and proxy.connections >= 1
    second = start_planner(suite, 1).name
    eventually(
        lambda: sum(r.fencing_token == old_token for r in drill.runs(limit=20)) >= 2,
        timeout=10,
        what="two fires of the first leader",
    )

    # When its link to leader-election is blackholed
    proxy.blackhole()

    # Then it stops leading before its lease expires (both watched every 20 ms)
    # The lease's end as leader-election reports it while the first planner holds it:
    # now + Redis's PTTL, so each report is late by however long leader-election took
    # between the two; the earliest report of the final end is the truest.
    ends: list[float] = []
    stopped_at: float | None = None
    taken: tuple[str, int] | None = None
    deadline = time.monotonic() + 15
    while taken is None and time.monotonic() < deadline:
        status = drill.status(first)
        if stopped_at is None and status is not None and not status.leader:
            stopped_at = time.time()
        lease = drill.lease()
        if lease.holder.startswith(f"{first}@"):
            ends.append(ts_to_dt(lease.expires_at).timestamp())
        elif lease.fencing_token > old_token:
            taken = drill.holder()
        time.sleep(0.02)
    assert taken is not None, "nobody took over"
    assert stopped_at is not None, "the cut-off planner never stopped leading"
    # A renewal in flight when the link was cut may still have moved the end, by at
    # least a renew interval (0.4 s): reports of an earlier end are left out.
    assert ends, "the first planner's lease was never seen after the cut"
    expires_at = min(end for end in ends if end > max(ends) - 0.2)
    assert stopped_at < expires_at, f"led {stopped_at - expires_at:.3f}s past its lease"
    assert "lost the lease" in log_text(drill, first)

    # And the other planner took over once the lease had expired, with a newer token
    assert taken[0] == second and taken[1] > old_token
    old = [ts_to_dt(r.created_at).timestamp() for r in drill.runs() if r.fencing_token == old_token]
    assert max(old) < expires_at
    eventually(
        lambda: any(r.fencing_token > old_token for r in drill.runs(limit=20)),
        timeout=10,
        what="a fire by the new leader",
    )
    new = [ts_to_dt(r.created_at).timestamp() for r in drill.runs() if r.fencing_token > old_token]
    assert min(new) >= expires_at - 0.02  # the end's rounding and report latency

    # And every slot has exactly one run, whose job ran once; nothing was refused
    accounts = drill.finish(datetime.now(UTC))
    assert accounts["audit"]["duplicate_runs"] == 0
    assert accounts["job_body_ran_twice"] == 0
    assert accounts["missed_fires"] == 0
    assert accounts["refused_stale"] == 0
    assert proxy.swallowed > 0
