"""Pause, resume and trigger-now against a real suite (planner process, real clock)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from typer.testing import CliRunner

from cronwave import Interval
from cronwave.cli.main import app
from cronwave_core.suite import Suite
from tests.conftest import SuiteFactory
from tests.helpers import eventually, fresh
from tests.schedules.conftest import LEASE_ENV, client_for, runs_of

pytestmark = pytest.mark.slow


def cli_env(suite: Suite) -> dict[str, str | None]:
    return {
        "CRONWAVE_STORE_ADDR": suite.store_addr,
        "CRONWAVE_DISPATCHER_ADDR": suite.dispatcher_addr,
        "CRONWAVE_PLANNER_ADDR": suite.planner_addr,
        "CRONWAVE_LEADER_ADDR": suite.leader_addr,
    }


def test_pause_stops_at_once_and_resume_does_not_catch_up_the_pause(
    make_suite: SuiteFactory,
) -> None:
    # Given a schedule every 2 s that would catch up everything within a day
    suite = make_suite(env=LEASE_ENV)
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
    eventually(lambda: len(runs_of(client, schedule_id)) >= 2, timeout=30, what="runs")

    # When it is paused from the CLI, with a note, for about 6 s
    runner = CliRunner()
    paused = runner.invoke(
        app, ["schedule", "pause", schedule_id, "--note", "db migration"], env=cli_env(suite)
    )
    assert paused.exit_code == 0, paused.stderr
    schedule = client.get_schedule(schedule_id)
    assert schedule.paused and schedule.pause_note == "db migration"
    assert schedule.updated_at is not None
    paused_at = schedule.updated_at
    described = runner.invoke(app, ["schedule", "describe", schedule_id], env=cli_env(suite))
    assert "db migration" in described.stdout
    deadline = time.monotonic() + 6
    eventually(lambda: time.monotonic() > deadline, timeout=10)
    resumed = runner.invoke(app, ["schedule", "resume", schedule_id], env=cli_env(suite))
    assert resumed.exit_code == 0, resumed.stderr
    resumed_at = client.get_schedule(schedule_id).updated_at
    assert resumed_at is not None

    # Then no slot of the pause is run or recorded -- the planner hears of the pause
    # over its watch within a second, so at most a slot due in that second fired --
    # and firing goes on after the resume
    eventually(
        lambda: sum(r.fire_time > resumed_at for r in runs_of(client, schedule_id)) >= 2,
        timeout=30,
        what="runs after the resume",
    )
    runs = runs_of(client, schedule_id)
    heard = paused_at + timedelta(seconds=1)
    during = [r for r in runs if heard < r.fire_time <= resumed_at]
    # (a run dispatched ahead of its fire time, before the pause, is cancelled by it)
    assert all(r.state == "CANCELLED" and r.error.startswith("paused") for r in during)
    assert all(r.fire_time <= paused_at + timedelta(seconds=3) for r in during)
    assert {r.trigger for r in runs} == {"SCHEDULED"}  # no catch-up of the pause
    assert {r.error for r in runs if r.state == "MISSED"} <= {"paused"}
    client.close()


def test_two_triggers_in_the_same_second_are_two_runs(make_suite: SuiteFactory) -> None:
    # Given a schedule that only ever runs when triggered
    suite = make_suite(env=LEASE_ENV)
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
