"""cron-planner as real processes in a whole suite: two replicas, one fires; schedule
changes arrive without restart; a frozen leader is replaced and fenced out."""

from __future__ import annotations

import itertools
import signal
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_core.convert import ts_to_dt
from cronwave_core.security.tls import new_channel
from cronwave_core.suite import Suite
from cronwave_core.telemetry.run_span import run_span_id, run_start_ns
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh, stored_spans

pytestmark = pytest.mark.slow

KIND = "cronwave.kind"
LEASE_ENV = {
    "CRONWAVE_LEASE_TTL": "3",
    "CRONWAVE_LEASE_RENEW_INTERVAL": "0.5",
    "CRONWAVE_LEASE_RETRY_INTERVAL": "0.2",
}


def store(suite: Suite) -> store_grpc.WorkflowStoreServiceStub:
    return store_grpc.WorkflowStoreServiceStub(hop_channel(suite, "workflow-store"))


def planner(address: str) -> planner_grpc.CronPlannerServiceStub:
    return planner_grpc.CronPlannerServiceStub(new_channel(address, ()))


def status(address: str) -> planner_pb.GetPlannerStatusResponse:
    return planner(address).GetPlannerStatus(planner_pb.GetPlannerStatusRequest(), timeout=5)


def every_two_seconds(s: store_grpc.WorkflowStoreServiceStub) -> str:
    job = fresh("job")
    job_type = common_pb2.JobType(name=job)
    job_type.duration_limit.FromSeconds(60)
    s.RegisterJobType(store_pb.RegisterJobTypeRequest(job_type=job_type), timeout=10)
    schedule_id = fresh("sched")
    spec = common_pb2.ScheduleSpec()
    spec.intervals.add().every.FromSeconds(2)
    schedule = common_pb2.Schedule(schedule_id=schedule_id, spec=spec, job_type=job)
    s.CreateSchedule(store_pb.CreateScheduleRequest(schedule=schedule), timeout=10)
    return schedule_id


def runs(s: store_grpc.WorkflowStoreServiceStub, schedule_id: str) -> list[common_pb2.Run]:
    reply = s.ListRuns(store_pb.ListRunsRequest(schedule_id=schedule_id, limit=500), timeout=10)
    return sorted(reply.runs, key=lambda r: ts_to_dt(r.fire_time))


def planner_addrs(suite: Suite) -> list[str]:
    return [p.address for name, p in suite.procs.items() if name.startswith("cron-planner")]


def test_one_of_two_planners_fires_every_slot_once(make_suite: SuiteFactory) -> None:
    # Given a suite with two planner replicas and a schedule every 2 s
    suite = make_suite(planners=2, env=LEASE_ENV)
    s = store(suite)
    schedule_id = every_two_seconds(s)

    # Then runs appear every 2 s, one per fire time, with the leader's token
    eventually(lambda: len(runs(s, schedule_id)) >= 4, timeout=30, what="four runs")
    got = runs(s, schedule_id)
    fires = [ts_to_dt(r.fire_time) for r in got]
    assert len(set(fires)) == len(fires)
    steps = {b - a for a, b in itertools.pairwise(fires)}
    assert steps == {timedelta(seconds=2)}
    assert all(f.microsecond == 0 and f.second % 2 == 0 for f in fires)
    assert all(r.fencing_token > 0 for r in got)
    assert all(
        r.idempotency_key == f"{schedule_id}@{ts_to_dt(r.fire_time).isoformat()}" for r in got
    )

    # And exactly one replica leads; both know the schedule and the store revision
    statuses = [status(a) for a in planner_addrs(suite)]
    leaders = [st for st in statuses if st.leader]
    assert len(leaders) == 1
    assert leaders[0].fencing_token == got[-1].fencing_token
    # (the counter moves when StartRun returns, just after the store has the run)
    assert leaders[0].fired >= len(got) - 1
    assert [st.fired for st in statuses if not st.leader] == [0]
    for st in statuses:
        assert st.schedules >= 1 and st.revision > 0
        assert st.next_schedule_id == schedule_id


def test_pause_and_resume_reach_the_planner_without_restart(make_suite: SuiteFactory) -> None:
    suite = make_suite(env=LEASE_ENV)
    s = store(suite)
    schedule_id = every_two_seconds(s)
    companion = every_two_seconds(s)  # fires on, so the planner is seen to move past slots
    eventually(lambda: len(runs(s, schedule_id)) >= 1, timeout=30, what="a first run")

    # When the schedule is paused
    paused = s.PauseSchedule(
        store_pb.PauseScheduleRequest(schedule_id=schedule_id), timeout=10
    ).schedule
    addr = suite.planner_addr
    # Then the planner hears of it over its watch
    eventually(lambda: status(addr).revision >= paused.revision, what="the pause heard")
    heard = datetime.now(UTC)
    # and, while it goes on firing the other schedule, no run of it follows

    def companion_fired_since() -> list[datetime]:
        created = sorted(ts_to_dt(r.created_at) for r in runs(s, companion))
        return [at for at in created if at > heard][:2]

    fired = eventually(
        lambda: len(companion_fired_since()) == 2 and companion_fired_since(),
        timeout=30,
        what="two fires of the other schedule after the pause was heard",
    )
    after_pause = runs(s, schedule_id)
    assert [r for r in after_pause if ts_to_dt(r.created_at) > heard] == []
    # and what was dispatched ahead for a fire time after the pause is cancelled by it
    # (the planner cancels in its loop, before it fired the second of those: a run due
    # before that may have started already)
    cancelled_by = fired[1]
    ahead = [r for r in after_pause if ts_to_dt(r.fire_time) > cancelled_by]
    assert all(
        r.state == common_pb2.RUN_STATE_CANCELLED and r.error.startswith("paused") for r in ahead
    ), ahead
    count = len(after_pause)

    # When it resumes, runs continue
    s.ResumeSchedule(store_pb.ResumeScheduleRequest(schedule_id=schedule_id), timeout=10)
    eventually(lambda: len(runs(s, schedule_id)) > count + 1, timeout=30, what="runs again")


def test_a_frozen_leader_is_replaced_and_every_slot_still_fires_once(
    make_suite: SuiteFactory,
) -> None:
    # Given two planners and a schedule every 2 s
    suite = make_suite(planners=2, env=LEASE_ENV)
    s = store(suite)
    schedule_id = every_two_seconds(s)
    eventually(lambda: len(runs(s, schedule_id)) >= 2, timeout=30, what="runs")
    names = {p.address: n for n, p in suite.procs.items() if n.startswith("cron-planner")}
    leader_addr = eventually(
        lambda: next((a for a in names if status(a).leader), None), what="a leader"
    )
    old_token = status(leader_addr).fencing_token
    other = next(a for a in names if a != leader_addr)

    # When the leader freezes
    suite.signal(names[leader_addr], signal.SIGSTOP)
    try:
        frozen_at = datetime.now(UTC)
        # Then the other takes over with a newer token, and keeps firing
        eventually(lambda: status(other).leader, timeout=15, what="the other leads")
        new_token = status(other).fencing_token
        assert new_token > old_token
        eventually(
            lambda: any(
                r.fencing_token == new_token and ts_to_dt(r.fire_time) > frozen_at
                for r in runs(s, schedule_id)
            ),
            timeout=20,
            what="runs by the new leader",
        )
    finally:
        suite.signal(names[leader_addr], signal.SIGCONT)

    # And the thawed old leader does not fire with its old token any more, while the new
    # one fires the next two slots
    thawed_at = datetime.now(UTC)
    eventually(lambda: not status(leader_addr).leader, timeout=10, what="old leader steps down")
    eventually(
        lambda: (
            sum(
                r.fencing_token == new_token and ts_to_dt(r.created_at) > thawed_at
                for r in runs(s, schedule_id)
            )
            >= 2
        ),
        timeout=30,
        what="two fires of the new leader after the thaw",
    )
    got = runs(s, schedule_id)
    fires = [ts_to_dt(r.fire_time) for r in got]
    assert len(set(fires)) == len(fires)
    late_old = [
        r for r in got if r.fencing_token == old_token and ts_to_dt(r.created_at) > thawed_at
    ]
    assert late_old == []
    # no slot was lost across the hand-over: each has one row (a run; or MISSED
    # superseded_by_latest when the slot after it had come too by the hand-over)
    steps = {b - a for a, b in itertools.pairwise(fires)}
    assert steps == {timedelta(seconds=2)}


def test_preview_fire_times_uses_the_planner_calendar(make_suite: SuiteFactory) -> None:
    suite = make_suite(env=LEASE_ENV)
    stub = planner(suite.planner_addr)
    request = planner_pb.PreviewFireTimesRequest(
        spec=common_pb2.ScheduleSpec(cron=["30 2 * * *"], time_zone="Europe/Berlin"), count=3
    )
    request.after.FromDatetime(datetime(2030, 3, 30, 12, 0))

    reply = stub.PreviewFireTimes(request, timeout=10)

    got = [ts_to_dt(t) for t in reply.fire_times]
    # 2030-03-31 02:30 Berlin does not exist (spring forward): shifted to 03:00 CEST
    assert got == [
        datetime(2030, 3, 31, 1, 0, tzinfo=UTC),
        datetime(2030, 4, 1, 0, 30, tzinfo=UTC),
        datetime(2030, 4, 2, 0, 30, tzinfo=UTC),
    ]
    for count in (0, 1001):
        request.count = count
        with pytest.raises(grpc.RpcError) as info:
            stub.PreviewFireTimes(request, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert info.value.details().startswith("count: ")
    bad = planner_pb.PreviewFireTimesRequest(
        spec=common_pb2.ScheduleSpec(cron=["not cron"]), count=1
    )
    with pytest.raises(grpc.RpcError) as info:
        stub.PreviewFireTimes(bad, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("spec.cron[0]")


def test_each_run_trace_starts_in_the_planner(make_suite: SuiteFactory) -> None:
    # Given a planner that fired a few runs
    suite = make_suite(env=LEASE_ENV)
    s = store(suite)
    schedule_id = every_two_seconds(s)
    eventually(lambda: len(runs(s, schedule_id)) >= 2, timeout=30, what="runs")
    got = {r.run_id: r for r in runs(s, schedule_id)}

    # When the suite stops (the span files are flushed)
    suite.stop()
    spans = stored_spans(suite.config.data_dir / "spans")

    # Then each run's trace begins with the planner's fire span, beneath the run span
    # (recorded when the run completes), with the run's attributes, the plan and
    # leader hops under it, and the dispatcher's work in the same trace
    roots = [
        sp
        for sp in spans
        if sp["name"] == "cron-planner fire" and sp["attributes"].get("cronwave.run_id") in got
    ]
    assert len(roots) >= 2
    for root in roots:
        run = got[root["attributes"]["cronwave.run_id"]]
        assert root["parent_span_id"] == f"{run_span_id(int(root['trace_id'], 16)):016x}"
        assert root["start_ns"] == run_start_ns(int(root["trace_id"], 16))
        assert root["service"] == "cron-planner"
        assert root["attributes"]["cronwave.schedule_id"] == schedule_id
        assert run.trace_id == root["trace_id"]
        in_trace = [sp for sp in spans if sp["trace_id"] == root["trace_id"]]
        hops = {
            (
                sp["service"],
                sp["attributes"].get("cronwave.hop"),
                sp["attributes"].get("cronwave.kind"),
            )
            for sp in in_trace
        }
        assert ("cron-planner", "plan", "app") in hops
        # the lease as the elector holds it: a look-up answered in the process
        assert ("cron-planner", "leader", "cache") in hops
        assert any(svc == "dispatcher" for svc, _, _ in hops)
        # The fire went to the dispatcher in a batch call, whose spans are copied into
        # this trace under the root: the batch span, and under it the StartRuns call.
        children = [sp for sp in in_trace if sp["parent_span_id"] == root["span_id"]]
        batches = [sp for sp in children if sp["name"] == "cron-planner dispatch"]
        assert batches, [sp["name"] for sp in children]
        calls = [sp for sp in in_trace if sp["parent_span_id"] == batches[0]["span_id"]]
        assert any(sp["name"].endswith("/StartRuns") for sp in calls)
        # ... and the store's recording of it too, in the same trace
        assert any(sp["name"].endswith("/RecordRuns") for sp in in_trace)


def test_the_watch_reconnects_after_the_store_restarts(make_suite: SuiteFactory) -> None:
    # Given a running planner that has loaded the schedules
    suite = make_suite(env=LEASE_ENV)
    addr = suite.planner_addr
    eventually(lambda: status(addr).leader, timeout=15, what="leading")

    # When the store restarts, and a schedule is created afterwards
    suite.restart("workflow-store")
    s = store(suite)
    schedule_id = every_two_seconds(s)

    # Then the planner learns of it over the re-opened watch and fires it
    eventually(lambda: status(addr).next_schedule_id == schedule_id, timeout=20, what="seen")
    eventually(lambda: len(runs(s, schedule_id)) >= 2, timeout=20, what="fired")


def test_a_planner_back_13s_behind_a_one_second_schedule_says_what_became_of_each_slot(
    make_suite: SuiteFactory,
) -> None:
    # Given one planner and a schedule every second (catch-up latest, overlap skip)
    suite = make_suite(planners=1, env=LEASE_ENV)
    s = store(suite)
    schedule_id = fresh("sched")
    spec = common_pb2.ScheduleSpec()
    spec.intervals.add().every.FromSeconds(1)
    policy = common_pb2.SchedulePolicy(
        overlap=common_pb2.OVERLAP_POLICY_SKIP, catchup=common_pb2.CATCHUP_POLICY_LATEST
    )
    schedule = common_pb2.Schedule(
        schedule_id=schedule_id, spec=spec, policy=policy, job_type="cronwave.noop"
    )
    s.CreateSchedule(store_pb.CreateScheduleRequest(schedule=schedule), timeout=10)
    eventually(lambda: len(runs(s, schedule_id)) >= 2, timeout=30, what="runs")

    # When the planner is stopped for 13 s and started again
    name = next(n for n in suite.procs if n.startswith("cron-planner"))
    suite.stop_proc(suite.procs[name])
    stopped_at = datetime.now(UTC)
    eventually(
        lambda: datetime.now(UTC) > stopped_at + timedelta(seconds=13),
        timeout=30,
        interval=0.2,
        what="13 s stopped",
    )
    suite.restart(name)
    back = eventually(
        lambda: [
            r
            for r in runs(s, schedule_id)
            if r.state != common_pb2.RUN_STATE_MISSED
            and ts_to_dt(r.created_at) > stopped_at + timedelta(seconds=13)
        ],
        timeout=60,
        what="a run after the restart",
    )

    # Then each slot of the outage has one outcome: the newest runs on time as
    # SCHEDULED, the ones before it are MISSED superseded_by_latest, and no SCHEDULED run
    # started late (nor was an older slot skipped as an overlap)
    # (the MISSED rows are written a moment after the run they go with is recorded)
    # (a slot after the first one back may be skipped as an overlap: on a busy machine
    # the run of the second before can still be in flight; that is the policy at work)
    first_back = ts_to_dt(back[0].fire_time)

    def outage_missed(rows: list[common_pb2.Run]) -> list[common_pb2.Run]:
        return [
            r
            for r in rows
            if r.state == common_pb2.RUN_STATE_MISSED and ts_to_dt(r.fire_time) < first_back
        ]

    got = eventually(
        lambda: (g := runs(s, schedule_id)) and len(outage_missed(g)) >= 10 and g,
        timeout=30,
        what="the outage's slots recorded",
    )
    fires = [ts_to_dt(r.fire_time) for r in got]
    assert len(set(fires)) == len(fires)
    missed = outage_missed(got)
    assert len(missed) >= 10
    assert {r.error for r in missed} == {"superseded_by_latest"}
    late = [
        (ts_to_dt(r.fire_time), ts_to_dt(r.created_at))
        for r in got
        if r.state != common_pb2.RUN_STATE_MISSED
        and r.trigger == common_pb2.TRIGGER_KIND_SCHEDULED
        and ts_to_dt(r.created_at) - ts_to_dt(r.fire_time) > timedelta(seconds=3)
    ]
    assert late == []
