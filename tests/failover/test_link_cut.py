"""Partitions for real: a process in a network namespace of its own, its veth link to
the rest of the suite taken down (``tests.harness.netns``), then brought back up.

The leading planner cut off: the other planner takes over once the lease has expired
and fires the slot the cut one was about to start; when the link heals, the cut one's
late start reaches the store and is refused for its stale fencing token, and it goes on
as a follower. A start can only be late across a cut if it was in flight when the cut
came: the cut planner holds each start after its lease check (``planner.hold_start``,
the stand-in for a slow network or a pause), and the link goes down inside a hold.
"""

from __future__ import annotations

import re
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

#: Seconds each start of the cut planner waits after its lease check: longer than the
#: lease's expiry plus the other planner's takeover and fire (about 2 s here), so the
#: link heals while the start cut off inside it is still held.
HOLD = 10.0
HELD = re.compile(r"holding the start of (\S+)@(\S+) \(fencing token (\d+)\)")


def test_a_leader_whose_link_is_cut_is_fenced_off_and_rejoins_as_a_follower(
    make_suite: SuiteFactory, drill_of, netns
) -> None:
    # Given a leading planner in a network namespace of its own, reaching the suite
    # only across a veth link, each of its starts held after its lease check
    suite = make_suite(planners=0, env=LEASE_ENV)
    drill = drill_of(suite)
    link = netns(suite)
    hold = {TEST_HOOKS: "1", "CRONWAVE_FAULT": f"planner.hold_start={HOLD}"}
    first = link.start_service("cron-planner", "cron-planner", hold).name
    _, old_token = eventually(
        lambda: (held := drill.holder()) is not None and held[0] == first and held[1] and held,
        timeout=30,
        what="the namespaced planner leading",
    )
    # and a second planner on loopback, then a 1-second schedule
    second = start_planner_process(suite, 1).name
    drill.create_schedule()

    # When its link goes down inside a hold: its lease checked, its start not yet sent
    def caught_in_hold() -> tuple[datetime, int] | None:
        held = HELD.findall(log_text(drill, first))
        if not held:
            return None
        link.cut()
        schedule_id, fire_time, token = held[-1]
        assert schedule_id == drill.schedule_id
        return datetime.fromisoformat(fire_time), int(token)

    slot, token = eventually(caught_in_hold, timeout=15, interval=0.01, what="a held start")
    assert token == old_token
    assert link.link_states() == ("DOWN", "DOWN")  # a real cut: neither end carries

    # Then the other planner takes over with a newer token and fires that slot
    def fired_by_successor() -> common_pb2.Run | None:
        runs = [r for r in drill.runs(limit=20) if ts_to_dt(r.fire_time) == slot]
        return runs[0] if runs else None

    run = eventually(fired_by_successor, timeout=30, interval=0.05, what="the slot fired")
    assert run.fencing_token > old_token
    assert drill.holder() == (second, run.fencing_token)
    # and the cut planner stopped leading on its own clock, its renewals unanswered
    eventually(lambda: "lost the lease" in log_text(drill, first), timeout=10, what="lease lost")
    log = log_text(drill, first)
    assert "renew failed" in log and "validity ran out before a renewal succeeded" in log
    assert drill.status(first) is None  # its server is out of reach too

    # When the link heals
    link.heal()
    assert link.link_states() == ("UP", "UP")

    # Then its late start reaches the store and is refused for the stale token
    refusal = f"start of {drill.schedule_id}@{slot.isoformat()} {STALE_MARKER} {old_token}"
    eventually(lambda: refusal in log_text(drill, first), timeout=HOLD + 20, what="the refusal")
    # and it answers again, as a follower of the new leader
    status = eventually(lambda: drill.status(first), timeout=20, what="the healed planner")
    assert not status.leader
    assert drill.holder() == (second, run.fencing_token)

    # And the slot has one run, by the new leader; no slot ran twice or went missing
    accounts = drill.finish(datetime.now(UTC))
    slot_runs = [r for r in drill.runs() if ts_to_dt(r.fire_time) == slot]
    assert [(r.fencing_token, r.state, r.attempt) for r in slot_runs] == [
        (run.fencing_token, common_pb2.RUN_STATE_SUCCEEDED, 1)
    ]
    assert accounts["refused_stale"] >= 1
    assert accounts["job_body_ran_twice"] == 0
    assert accounts["audit"]["duplicate_runs"] == 0
    assert accounts["missed_fires"] == 0
