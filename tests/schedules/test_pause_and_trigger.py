"""Pause, resume and trigger-now against a real suite (planner process, real clock).

The module's tests share one suite (``shared_suite``): each works on schedules of its
own, under fresh ids, and reads only their runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc
from typer.testing import CliRunner

from cronwave import Interval
from cronwave.cli.main import app
from cronwave_core.suite import Suite
from tests.harness.clients import client_for
from tests.harness.suites import SuiteFactory
from tests.harness.tls import hop_channel
from tests.helpers import eventually, fresh
from tests.schedules.conftest import LEASE_ENV, runs_of

pytestmark = pytest.mark.slow


def cli_env(suite: Suite) -> dict[str, str | None]:
    return {
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
    }


def test_pause_stops_at_once_and_resume_does_not_catch_up_the_pause(
    shared_suite: SuiteFactory,
) -> None:
    # Given a schedule every 2 s that would catch up everything within a day
    suite = shared_suite(env=LEASE_ENV)
    client = client_for(suite)
    schedule_id = fresh("pause")
    client.create_schedule(
        schedule_id,
        intervals=[Interval(timedelta(seconds=2))],
        job_type="cronwave.noop",
        catchup="all",
        catchup_window=timedelta(days=1),
        overlap="allow_all",
    )
    # and another one every 2 s, which goes on firing: the planner is seen to move on
    companion = fresh("companion")
    client.create_schedule(
        companion,
        intervals=[Interval(timedelta(seconds=2))],
        job_type="cronwave.noop",
        overlap="allow_all",
    )
    eventually(lambda: len(runs_of(client, schedule_id)) >= 2, timeout=30, what="runs")

    # When it is paused from the CLI, with a note
    runner = CliRunner()
    paused = runner.invoke(
        app, ["schedule", "pause", schedule_id, "--note", "db migration"], env=cli_env(suite)
    )
    assert paused.exit_code == 0, paused.stderr
    schedule = client.get_schedule(schedule_id)
    assert schedule.paused and schedule.pause_note == "db migration"
    described = runner.invoke(app, ["schedule", "describe", schedule_id], env=cli_env(suite))
    assert "db migration" in described.stdout
    # and the planner has heard of it over its watch
    store = store_grpc.WorkflowStoreServiceStub(hop_channel(suite, "workflow-store"))
    revision = store.GetSchedule(
        store_pb.GetScheduleRequest(schedule_id=schedule_id), timeout=10
    ).schedule.revision
    eventually(lambda: client.planner_status().revision >= revision, what="the pause heard")
    heard = datetime.now(UTC)

    # and stays paused while the planner fires the other schedule twice more
    def companion_fired_since() -> list[datetime]:
        created = sorted(r.created_at for r in runs_of(client, companion) if r.created_at)
        return [at for at in created if at > heard][:2]

    fired = eventually(
        lambda: len(companion_fired_since()) == 2 and companion_fired_since(),
        timeout=30,
        what="two fires of the other schedule during the pause",
    )
    resumed = runner.invoke(app, ["schedule", "resume", schedule_id], env=cli_env(suite))
    assert resumed.exit_code == 0, resumed.stderr
    resumed_at = client.get_schedule(schedule_id).updated_at
    assert resumed_at is not None

    # Then nothing of it was fired once the planner had heard of the pause, and what was
    # dispatched ahead for a later fire time is cancelled (by the planner's loop, before
    # its second fire above: a run due before that may have started already) -- and
    # firing goes on after the resume
    eventually(
        lambda: sum(r.fire_time > resumed_at for r in runs_of(client, schedule_id)) >= 2,
        timeout=30,
        what="runs after the resume",
    )
    runs = runs_of(client, schedule_id)
    assert [r for r in runs if r.created_at and heard < r.created_at < resumed_at] == []
    ahead = [r for r in runs if fired[1] < r.fire_time <= resumed_at]
    assert all(r.state == "CANCELLED" and r.error.startswith("paused") for r in ahead), ahead
    assert {r.trigger for r in runs} == {"SCHEDULED"}  # no catch-up of the pause
    assert {r.error for r in runs if r.state == "MISSED"} <= {"paused"}
    client.close()


def test_two_triggers_in_the_same_second_are_two_runs(shared_suite: SuiteFactory) -> None:
    # Given a schedule that only ever runs when triggered
    suite = shared_suite(env=LEASE_ENV)
    client = client_for(suite)
    schedule_id = fresh("trigger")
    client.create_schedule(schedule_id, cron="0 0 1 1 *", job_type="cronwave.noop")

    # When it is triggered twice within one second (retried until two land in one)
    for _ in range(10):
        first = client.trigger(schedule_id)
        second = client.trigger(schedule_id)
        if first.fire_time.replace(microsecond=0) == second.fire_time.replace(microsecond=0):
            break
    else:
        pytest.fail("no two triggers landed in the same second")

    # Then they are two runs, each MANUAL, and both run
    assert first.run_id != second.run_id
    assert first.fire_time != second.fire_time
    assert {first.trigger, second.trigger} == {"MANUAL"}
    for run in (first, second):
        done = client.wait_run(run.run_id, timeout=timedelta(seconds=30))
        assert done.state == "SUCCEEDED"

    # And the CLI triggers a new run each time too
    runner = CliRunner()
    before = len(runs_of(client, schedule_id))
    for _ in range(2):
        result = runner.invoke(app, ["schedule", "trigger", schedule_id], env=cli_env(suite))
        assert result.exit_code == 0, result.stderr
    assert len(runs_of(client, schedule_id)) == before + 2
    client.close()


def test_describe_lists_no_fire_time_past_a_reached_max_runs(shared_suite: SuiteFactory) -> None:
    # Given a schedule every second that may fire twice, with no start to count from
    suite = shared_suite(env=LEASE_ENV)
    client = client_for(suite)
    schedule_id = fresh("twice")
    created = client.create_schedule(
        schedule_id,
        intervals=[Interval(timedelta(seconds=1))],
        job_type="cronwave.noop",
        max_runs=2,
    )
    # (before it fired, the preview offers at most its two fire times)
    assert len(client.preview(created, count=5)) <= 2

    # When it has had both
    eventually(lambda: len(runs_of(client, schedule_id)) >= 2, timeout=30, what="two runs")

    # Then the preview and describe offer no further fire time, and say why
    schedule = client.get_schedule(schedule_id)
    assert client.preview(schedule, count=5) == []
    described = CliRunner().invoke(app, ["schedule", "describe", schedule_id], env=cli_env(suite))
    assert described.exit_code == 0, described.stderr
    assert "max runs reached (2): no more fire times" in described.stdout
    assert "Next fire times" not in described.stdout
    # and the planner indeed fired it no more than twice
    assert len(runs_of(client, schedule_id)) == 2
    client.close()
