"""``cronwave status`` judges a schedule by its slots only: the newest SCHEDULED,
CATCHUP or BACKFILL run. A MANUAL run (``cronwave schedule trigger``, the demo's run)
proves nothing of any slot, so it never answers "did nightly billing run?"."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2 as pb
from rich.console import Console
from typer.testing import CliRunner

from cronwave import Run, Schedule
from cronwave.cli._status import document, status_of
from cronwave.cli.main import app
from cronwave.cli.status import RUNS_LOOKED_AT, _table
from cronwave_core.suite import Suite
from tests.cli.test_cli_suite import env_for, ok
from tests.harness.clients import backfill_last_slot, client_for
from tests.harness.suites import SuiteFactory
from tests.helpers import fresh

SLOT = datetime(2030, 1, 7, 2, 0, tzinfo=UTC)
SCHEDULE = Schedule.from_proto(
    pb.Schedule(
        schedule_id="nightly-billing",
        spec=pb.ScheduleSpec(cron=["0 2 * * *"], time_zone="UTC"),
        job_type="cronwave.noop",
    )
)


def run(trigger: str, fire_time: datetime, state: str = "SUCCEEDED") -> Run:
    began = fire_time + timedelta(milliseconds=40)
    return Run(
        run_id=f"run-{trigger}-{fire_time:%H%M%S}", schedule_id="nightly-billing",
        fire_time=fire_time, state=state, trigger=trigger, job_type="cronwave.noop",
        payload_json="", attempt=1, fencing_token=1, idempotency_key="", created_at=None,
        started_at=began, finished_at=began + timedelta(seconds=2), heartbeat_at=None,
        error="", result_json="", checkpoint_json="", queue="default", worker_id="w",
        trace_id="",
    )  # fmt: skip


def table_text(runs: list[Run], complete: bool = True) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(_table([status_of(SCHEDULE, runs, None, complete=complete)]))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_manual_run_alone_is_no_slot_yet() -> None:
    # Given a schedule whose only run is a manual trigger that succeeded on time
    manual = run("MANUAL", SLOT + timedelta(hours=5))
    # When its status is told
    status = status_of(SCHEDULE, [manual], None)
    # Then it has no last slot, and neither the table nor the JSON says it ran
    assert status.last_slot is None and status.on_time is None
    assert document(status)["last_slot"] is None
    text = table_text([manual])
    assert "no slot yet" in text
    assert "SUCCEEDED" not in text and "yes" not in text


def test_a_manual_run_newer_than_the_slot_leaves_the_slot_its_answer() -> None:
    # Given a 02:00 slot that failed, then a manual trigger that succeeded
    slot = run("SCHEDULED", SLOT, state="FAILED")
    manual = run("MANUAL", SLOT + timedelta(hours=5))
    # When its status is told
    status = status_of(SCHEDULE, [manual, slot], None)
    # Then the last slot is the failed one
    assert status.last_slot == slot
    assert "FAILED" in table_text([manual, slot])


@pytest.mark.parametrize("trigger", ["SCHEDULED", "CATCHUP", "BACKFILL"])
def test_a_planned_run_of_any_kind_is_a_slot(trigger: str) -> None:
    given = run(trigger, SLOT)
    status = status_of(SCHEDULE, [run("MANUAL", SLOT + timedelta(hours=1)), given], None)
    assert status.last_slot == given and status.on_time is True


def test_a_window_of_manual_runs_only_does_not_claim_there_never_was_a_slot() -> None:
    # Given as many manual runs as status looks at (an older slot may lie beyond them)
    manual = [run("MANUAL", SLOT + timedelta(minutes=i)) for i in range(RUNS_LOOKED_AT)]
    # Then status says it found no slot among them, not that there is none
    text = table_text(manual, complete=False)
    assert f"no slot in the newest {RUNS_LOOKED_AT} runs" in text
    assert "no slot yet" not in text


@pytest.mark.slow
def test_status_after_a_manual_trigger_says_no_slot_yet_until_a_slot_ran(
    make_suite: SuiteFactory,
) -> None:
    suite: Suite = make_suite()
    env = env_for(suite)
    schedule_id = fresh("status")
    create = ["schedule", "create", schedule_id, "--cron", "0 2 * * *"]
    ok([*create, "--job-type", "cronwave.noop"], env)
    with client_for(suite) as client:
        # Given a schedule whose only run is a manual trigger that succeeded (the demo's)
        manual = client.trigger(schedule_id)
        assert client.wait_run(manual.run_id, timeout=timedelta(seconds=60)).state == "SUCCEEDED"

        # When `cronwave status` is asked
        # Then it has no slot to judge: no SUCCEEDED, no "yes"
        (shown,) = json.loads(ok(["status", "--schedule", schedule_id, "-o", "json"], env))
        assert shown["last_slot"] is None
        table = CliRunner().invoke(app, ["status", "--schedule", schedule_id], env=env)
        assert table.exit_code == 0, table.stdout
        assert "no slot yet" in table.stdout
        assert "SUCCEEDED" not in table.stdout and "yes" not in table.stdout

        # And once a slot ran (last night's, backfilled), that slot is the answer
        slot = backfill_last_slot(client, schedule_id)
        (shown,) = json.loads(ok(["status", "--schedule", schedule_id, "-o", "json"], env))
        assert shown["last_slot"]["run_id"] == slot.run_id != manual.run_id
        assert shown["last_slot"]["state"] == "SUCCEEDED"
