"""Backfill end to end against real planner processes: bounds (start inclusive, end
exclusive), dry runs, the leader-only rule, a paced real backfill, and that a backfill
never runs a slot twice but does run a MISSED one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave import Client, FailedPrecondition, InvalidArgument, Run
from cronwave_core.suite import Suite
from cronwave_core.telemetry.run_span import run_start_ns
from tests.harness.store import record_missed
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh
from tests.schedules.conftest import LEASE_ENV, runs_of

pytestmark = pytest.mark.slow


def hourly(client: Client) -> str:
    schedule_id = fresh("backfill")
    client.create_schedule(schedule_id, cron="0 * * * *", job_type="cronwave.noop")
    return schedule_id


def planner_clients(suite: Suite) -> tuple[Client, Client]:
    """Clients whose planner address is the leader's and a follower's."""
    addrs = [p.address for name, p in suite.procs.items() if name.startswith("cron-planner")]
    clients = [
        Client(
            store_addr=suite.store_addr,
            dispatcher_addr=suite.dispatcher_addr,
            planner_addr=addr,
            leader_addr=suite.leader_addr,
            timeout=timedelta(seconds=10),
        )
        for addr in addrs
    ]

    def leader_first() -> list[Client] | None:
        leading = [c.planner_status().leader for c in clients]
        if leading.count(True) != 1:
            return None
        return sorted(clients, key=lambda c: not c.planner_status().leader)

    ordered = eventually(leader_first, timeout=30, what="one leading planner")
    return ordered[0], ordered[1]


def test_backfill_bounds_dry_run_leader_rule_and_real_runs(make_suite: SuiteFactory) -> None:
    suite = make_suite(planners=2, env=LEASE_ENV)
    leader, follower = planner_clients(suite)
    schedule_id = hourly(leader)
    eventually(
        lambda: all(c.planner_status().schedules >= 1 for c in (leader, follower)),
        what="both replicas loaded the schedule",
    )
    base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)
    hours = [base + timedelta(hours=h) for h in range(6)]

    # Dry run: start inclusive, end exclusive; adjacent ranges share no fire time;
    # nothing runs; any replica answers
    assert follower.backfill(schedule_id, hours[0], hours[3], dry_run=True) == hours[0:3]
    assert leader.backfill(schedule_id, hours[3], hours[5], dry_run=True) == hours[3:5]
    assert leader.backfill(
        schedule_id, hours[0] + timedelta(seconds=1), hours[2], dry_run=True
    ) == [hours[1]]
    assert _past_runs(leader, schedule_id) == []

    # Bad requests name the field
    future = datetime.now(UTC) + timedelta(hours=1)
    for start, end, rate, field in [
        (hours[0], future, 0.0, "end"),
        (hours[2], hours[1], 0.0, "end"),
        (hours[0], hours[1], 1000.0, "rate_per_second"),
    ]:
        with pytest.raises(InvalidArgument) as info:
            leader.backfill(schedule_id, start, end, dry_run=True, rate_per_second=rate)
        assert info.value.field == field
    with pytest.raises(InvalidArgument) as bad_overlap:
        leader.backfill(schedule_id, hours[0], hours[1], overlap="sometimes")
    assert bad_overlap.value.field == "policy.overlap"

    # Only the leader runs a backfill; a follower names it
    holder = leader.leader().holder
    with pytest.raises(FailedPrecondition) as refused:
        follower.backfill(schedule_id, hours[0], hours[3])
    assert refused.value.message == f"not the leader; ask {holder}"

    # A real backfill runs each fire time once, with trigger BACKFILL, paced (the
    # overlap policy applies to backfilled runs too; this one lets them overlap)
    got = leader.backfill(schedule_id, hours[0], hours[3], rate_per_second=4, overlap="allow_all")
    assert got == hours[0:3]
    done = eventually(
        lambda: _all_succeeded(leader, schedule_id, 3), timeout=30, what="backfilled runs"
    )
    assert [r.fire_time for r in done] == hours[0:3]
    assert {r.trigger for r in done} == {"BACKFILL"}
    # (each waited as a placeholder, then started a quarter second after the last).
    # The pace is the planner's: each run's trace id holds the instant the planner
    # started it. The store's "recorded" times also carry how long each call took to
    # get there, and under load a slow first call and a fast last one brought three
    # starts 0.5 s apart to 0.4 s there.
    started = sorted(_started_at(r) for r in done)
    # paced at 4/s: three starts span at least 0.5 s (0.45: the planner reads its clock
    # once per step, and again for each fire's trace)
    assert started[-1] - started[0] >= 0.45e9

    # Backfilling the same range again starts nothing new
    leader.backfill(schedule_id, hours[0], hours[3], rate_per_second=50, overlap="allow_all")
    again = eventually(lambda: _all_succeeded(leader, schedule_id, 3), what="still three")
    assert {r.run_id for r in again} == {r.run_id for r in done}

    # A slot recorded MISSED is run by a backfill (the same run, now BACKFILL)
    missed = _record_missed(suite, schedule_id, hours[3])
    leader.backfill(schedule_id, hours[3], hours[4])
    revived = eventually(
        lambda: _all_succeeded(leader, schedule_id, 4), timeout=30, what="missed slot run"
    )
    assert revived[3].run_id == missed and revived[3].trigger == "BACKFILL"
    assert "was MISSED" in " ".join(e.detail for e in leader.run_events(missed))

    # A paused schedule is not backfilled
    leader.pause_schedule(schedule_id, note="no backfill now")
    eventually(
        lambda: leader.planner_status().next_schedule_id != schedule_id,
        what="pause reached the planner",
    )
    with pytest.raises(FailedPrecondition) as paused:
        leader.backfill(schedule_id, hours[4], hours[5])
    assert "paused" in paused.value.message
    for c in (leader, follower):
        c.close()


def _past_runs(client: Client, schedule_id: str) -> list[Run]:
    """Runs of past fire times (the schedule's own next fire is not the test's)."""
    now = datetime.now(UTC)
    return [r for r in runs_of(client, schedule_id) if r.fire_time < now]


def _started_at(run: Run) -> int:
    """When the planner started the run (ns since the epoch), as its trace id says."""
    started = run_start_ns(int(run.trace_id, 16))
    assert started is not None, f"run {run.run_id}: trace {run.trace_id} is no run's"
    return started


def _all_succeeded(client: Client, schedule_id: str, count: int) -> list[Run] | None:
    runs = _past_runs(client, schedule_id)
    if len(runs) == count and all(r.state == "SUCCEEDED" for r in runs):
        return runs
    return None


def _record_missed(suite: Suite, schedule_id: str, fire_time: datetime) -> str:
    """Record ``fire_time`` MISSED as the leading planner would (its fencing token)."""
    with hop_channel(suite, "workflow-store") as channel:
        stub = store_grpc.WorkflowStoreServiceStub(channel)
        token = stub.GetFencingToken(store_pb.GetFencingTokenRequest(), timeout=10).fencing_token
        recorded, run = record_missed(
            stub, schedule_id, fire_time, reason="outside_catchup_window", token=token
        )
        assert recorded == 1 and run is not None and run.state == common_pb2.RUN_STATE_MISSED
        return str(run.run_id)
