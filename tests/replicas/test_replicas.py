"""Every service in replicas, tested together: two workflow-stores, leader-elections,
dispatchers, workers and cron-planners over one PostgreSQL database and one Redis,
every caller spreading its calls over the replicas it calls (``cronwave_core.targets``).

Each slot runs once and none is lost, with calls on both store replicas; a store
replica killed while its answers to committed batches are held back loses and doubles
nothing; a planner's schedule watch moves to the other store replica and misses no
change made meanwhile. Two store replicas need a database they share, so these run on
PostgreSQL only (``CRONWAVE_TEST_DATABASE_URL``, as CI runs): a SQLite file belongs to
one store process.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

import cronwave
from cronwave_core.security.tls import new_channel
from cronwave_core.suite import Proc, Suite
from tests.conftest import PG_URL
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory
from tests.helpers import eventually, fresh
from tests.replicas.support import (
    ONE_SECOND,
    batch_calls,
    create_marking,
    pause_all,
    replicated_suite,
    retried,
    scheduled_runs,
    settled_audit,
    stores,
    watch_streams,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not PG_URL,
        reason="two store replicas share one database: PostgreSQL (CRONWAVE_TEST_DATABASE_URL)",
    ),
]

#: How long the schedules fire in the steady test, and after the kill in the others.
FIRING = timedelta(seconds=20)
AFTER_KILL = timedelta(seconds=8)


def fired_through(
    client: cronwave.Client, schedules: list[cronwave.Schedule], at: datetime
) -> None:
    """Wait (bounded) until every schedule has a scheduled run at or after ``at``."""

    def every_one() -> bool:
        late = [
            s.schedule_id
            for s in schedules
            if not any(r.fire_time >= at for r in scheduled_runs(client, s.schedule_id))
        ]
        assert not late, f"no run at or after {at} yet: {late[:3]}"
        return True

    wait = (at - datetime.now(UTC)).total_seconds() + 60
    eventually(every_one, timeout=wait, interval=0.5, what=f"runs through {at}")


def lost_answers(suite: Suite) -> int:
    """Calls the planners and workers logged as failed UNAVAILABLE (each retried): a
    start whose store answer was lost, a completion, a claim."""
    names = [p for p in suite.procs.values() if p.service in ("cron-planner", "worker")]
    return sum(
        line.count("UNAVAILABLE")
        for proc in names
        for line in proc.log_path.read_text(errors="replace").splitlines()
        if "failed (" in line or "UNAVAILABLE (" in line
    )


def kill(suite: Suite, proc: Proc) -> None:
    suite.signal(proc.name, signal.SIGKILL)
    eventually(lambda: not proc.alive(), timeout=10, what=f"{proc.name} died")


@pytest.mark.timeout(300)
def test_every_slot_runs_once_with_two_of_every_service(
    make_suite: SuiteFactory, tmp_path: Path
) -> None:
    # Given every service in replicas and six 1-second schedules
    marks = tmp_path / "marks"
    marks.mkdir()
    suite = replicated_suite(make_suite)
    with client_for(suite) as client:
        schedules = create_marking(client, marks, 6)
        until = datetime.now(UTC) + FIRING

        # When they fire for 20 seconds
        fired_through(client, schedules, until)
        pause_all(client, schedules)

        # Then every slot has one run, SUCCEEDED, its body run once
        audit = settled_audit(client, schedules, until, marks)
    calls = {proc.name: batch_calls(proc) for proc in stores(suite)}
    print(f"slots {audit.slots}; calls per store replica {calls}")
    assert audit.slots >= len(schedules) * 15, audit
    assert audit.clean(), audit
    # And both store replicas recorded and claimed runs: the callers spread their calls
    for name, counts in calls.items():
        assert counts["RecordRuns"] > 0 and counts["ClaimRuns"] > 0, (name, calls)


@pytest.mark.timeout(300)
def test_a_store_replica_killed_mid_batch_loses_and_doubles_nothing(
    make_suite: SuiteFactory, tmp_path: Path
) -> None:
    # Given every service in replicas, each store holding back its answer to a
    # committed RecordRuns or CompleteRuns for 500 ms, and ten 1-second schedules
    marks = tmp_path / "marks"
    marks.mkdir()
    held = "delay=persist:database:500ms:1,delay=complete:database:500ms:1"
    suite = replicated_suite(make_suite, test_hooks=True, env={"CRONWAVE_FAULT": held})
    victim = stores(suite)[1]
    with client_for(suite) as client:
        schedules = create_marking(client, marks, 10)
        eventually(
            lambda: all(batch_calls(p)["RecordRuns"] > 0 for p in stores(suite)),
            timeout=60,
            interval=0.2,
            what="runs recorded on both store replicas",
        )

        # When one store replica is killed -9 right after it committed a batch of runs
        # (its answer still held back)
        before = batch_calls(victim)["RecordRuns"]
        eventually(
            lambda: batch_calls(victim)["RecordRuns"] > before,
            timeout=30,
            interval=0.02,
            what=f"{victim.name} committed a batch",
        )
        lost_before = lost_answers(suite)
        kill(suite, victim)
        killed_at = datetime.now(UTC)

        # And the schedules fire on for 8 seconds with the other one
        until = killed_at + AFTER_KILL
        fired_through(client, schedules, until)
        pause_all(client, schedules)

        # Then every slot before, across and after the kill has one run, SUCCEEDED,
        # its body run once
        audit = settled_audit(client, schedules, until, marks, timeout=90)
        first = min(
            r.fire_time
            for s in schedules
            for r in eventually(partial(scheduled_runs, client, s.schedule_id))
        )
    print(f"slots {audit.slots}, first {first}, killed at {killed_at}")
    assert first < killed_at, "the kill came before any slot"
    assert audit.slots >= len(schedules) * 8, audit
    assert audit.clean(), audit
    # And the kill did cut calls in flight: answers its callers never got, and asked
    # again of the other replica
    lost = lost_answers(suite) - lost_before
    print(f"calls that met the kill: {lost}")
    assert lost > 0


def _store_revision(suite: Suite) -> int:
    with new_channel(suite.store_addr, (), suite.tls()) as channel:
        stub = store_grpc.WorkflowStoreServiceStub(channel)
        return int(stub.ListSchedules(store_pb.ListSchedulesRequest(limit=1), timeout=10).revision)


def _planner_status(suite: Suite, proc: Proc) -> planner_pb.GetPlannerStatusResponse:
    with new_channel(proc.address, (), suite.tls()) as channel:
        stub = planner_grpc.CronPlannerServiceStub(channel)
        return stub.GetPlannerStatus(planner_pb.GetPlannerStatusRequest(), timeout=10)


@pytest.mark.timeout(300)
def test_a_planners_schedule_watch_moves_to_the_other_store_and_misses_no_change(
    make_suite: SuiteFactory,
) -> None:
    # Given every service in replicas, and both planners' schedule watches on the
    # second store replica: the first was killed and started again, so every watch
    # that was on it moved (a watch moves only when its stream breaks)
    suite = replicated_suite(make_suite)
    first, second = stores(suite)
    planners = [p for p in suite.procs.values() if p.service == "cron-planner"]
    eventually(
        lambda: sum(watch_streams(p) or 0 for p in (first, second)) == len(planners),
        timeout=60,
        what="a watch per planner",
    )
    kill(suite, first)
    eventually(lambda: watch_streams(second) == len(planners), timeout=30, what="watches moved")
    suite.restart(first.name)
    assert watch_streams(first) == 0
    with client_for(suite) as client:
        resumed = client.create_schedule(
            fresh("resumed"), job_type="cronwave.noop", intervals=[ONE_SECOND], paused=True
        )
        before = _store_revision(suite)

        # When the second store replica is killed -9, and schedules are created and
        # one resumed while the watches move
        kill(suite, second)
        created: list[cronwave.Schedule] = []
        for i in range(6):
            name = fresh(f"moved{i}")
            create = partial(
                client.create_schedule,
                name,
                job_type="cronwave.noop",
                intervals=[ONE_SECOND],
                if_absent=True,
            )
            created.append(retried(create, f"create {name}"))
            if i == 1:
                retried(partial(client.resume_schedule, resumed.schedule_id), "resume")
        after = _store_revision(suite)
        listed = len(client.list_schedules())

        # Then both watches are on the first replica
        eventually(
            lambda: watch_streams(first) == len(planners), timeout=30, what="watches moved back"
        )

        # And each planner applied every revision up to the store's newest: no change
        # made during the move was skipped
        assert after >= before + 7  # six creations and the resume

        def caught_up(proc: Proc) -> bool:
            status = _planner_status(suite, proc)
            assert (status.revision, status.schedules) == (after, listed), (proc.name, status)
            return True

        for proc in planners:
            eventually(partial(caught_up, proc), timeout=30, what=f"{proc.name} caught up")

        # And the leader fires every schedule created or resumed during the move
        def fired(schedule_id: str) -> bool:
            runs = scheduled_runs(client, schedule_id)
            assert any(r.state == "SUCCEEDED" for r in runs), (schedule_id, runs[:1])
            return True

        for schedule in [*created, resumed]:
            eventually(
                partial(fired, schedule.schedule_id),
                timeout=60,
                interval=0.5,
                what=f"{schedule.schedule_id} fired",
            )
    for proc in planners:
        log = proc.log_path.read_text(errors="replace")
        print(proc.name, log.count("schedule feed interrupted"), "feed interruptions")
