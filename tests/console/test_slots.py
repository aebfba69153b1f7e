"""``console.slots``: what a run looks like in a strip, and why."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from console.slots import by_slot, classify, human, last_slot, missed_reason, strip
from cronwave import DeadlineBreach, Run

FIRE = datetime(2030, 1, 7, 2, 0, tzinfo=UTC)
LATE_AFTER = timedelta(seconds=5)


def run(state: str, *, started: timedelta | None = None, error: str = "") -> Run:
    return Run(
        run_id="run_1", schedule_id="s", fire_time=FIRE, state=state, trigger="SCHEDULED",
        job_type="cronwave.noop", payload_json="", attempt=1, fencing_token=1,
        idempotency_key="", created_at=None,
        started_at=None if started is None else FIRE + started,
        finished_at=None if started is None else FIRE + started + timedelta(seconds=2),
        heartbeat_at=None, error=error, result_json="", checkpoint_json="", queue="default",
        worker_id="w", trace_id="",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("given", "outcome"),
    [
        (run("SUCCEEDED", started=timedelta(milliseconds=40)), "ran"),
        (run("SUCCEEDED", started=timedelta(seconds=5)), "ran"),
        (run("SUCCEEDED", started=timedelta(seconds=6)), "late"),
        (run("FAILED", started=timedelta(0), error="boom"), "failed"),
        (run("TIMED_OUT", started=timedelta(0)), "failed"),
        (run("DEAD_LETTERED"), "failed"),
        (run("CANCELLED"), "failed"),
        (run("MISSED", error="catchup_skip"), "missed"),
        (run("RUNNING", started=timedelta(0)), "running"),
        (run("WAITING"), "waiting"),
        (run("PENDING"), "running"),
    ],
)
def test_each_state_has_one_outcome(given: Run, outcome: str) -> None:
    assert classify(given, LATE_AFTER).outcome == outcome


def test_a_missed_slot_says_why_in_words() -> None:
    slot = classify(run("MISSED", error="overlap_skip"), LATE_AFTER)
    assert slot.reason == (
        "not run: the previous run was still running and the overlap policy is skip"
    )
    assert "2030-01-07 02:00:00Z missed" in slot.label


def test_a_reason_with_detail_or_unknown_code_is_kept() -> None:
    assert missed_reason("outside_catchup_window: 40 slots").endswith("(40 slots)")
    assert missed_reason("something_new") == "not run: something_new"
    assert missed_reason("") == "not run"


def test_a_run_held_for_its_fire_time_is_waiting_not_running() -> None:
    # Given a run a worker claimed ahead of its fire time: its body has not begun
    slot = classify(run("WAITING"), LATE_AFTER)
    # Then it is shown waiting, held by its worker, never "running; began -"
    assert slot.outcome == "waiting"
    assert slot.reason.startswith("waiting: claimed by w; its body starts at its fire time")
    assert "began" not in slot.reason


def test_a_failure_names_its_error_and_a_success_its_lateness() -> None:
    assert classify(run("FAILED", error="card declined"), LATE_AFTER).reason == (
        "failed: card declined"
    )
    ok = classify(run("SUCCEEDED", started=timedelta(milliseconds=250)), LATE_AFTER)
    assert ok.reason == "succeeded; lateness 250 ms, took 2.0 s"


def test_the_strip_is_oldest_first() -> None:
    newer = replace(run("SUCCEEDED", started=timedelta(0)), fire_time=FIRE + timedelta(days=1))
    older = run("MISSED", error="catchup_skip")
    assert [s.outcome for s in strip([newer, older], LATE_AFTER)] == ["missed", "ran"]


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "RUNNING", "WAITING", "PENDING"])
def test_a_manual_run_is_manual_whatever_became_of_it(state: str) -> None:
    # Given a manual trigger (the demo's) in any state
    manual = replace(run(state, started=timedelta(0)), trigger="MANUAL")
    # Then it is never shown as a slot: its outcome is manual, its reason says so first
    slot = classify(manual, LATE_AFTER)
    assert slot.outcome == "manual"
    assert slot.reason.startswith("manual trigger, not a slot; ")
    assert " manual: manual trigger" in slot.label and " ran:" not in slot.label


@pytest.mark.parametrize("trigger", ["SCHEDULED", "CATCHUP", "BACKFILL"])
def test_a_planned_run_is_a_slot(trigger: str) -> None:
    given = replace(run("SUCCEEDED", started=timedelta(0)), trigger=trigger)
    assert classify(given, LATE_AFTER).outcome == "ran"


def test_the_last_slot_passes_over_manual_runs_and_a_breach_leaves_them_manual() -> None:
    # Given a failed 02:00 slot and a newer manual run whose fire time has a breach
    slot = run("FAILED", started=timedelta(0), error="boom")
    at = FIRE + timedelta(hours=5)
    manual = replace(run("SUCCEEDED", started=timedelta(0)), trigger="MANUAL", fire_time=at)
    breach = DeadlineBreach(
        breach_id=1, schedule_id="s", fire_time=at, deadline_at=at, reason="failed",
        cause="", run_id="", run_state="", detected_at=at, deliveries=[],
    )  # fmt: skip
    cells = strip([manual, slot], LATE_AFTER, by_slot([breach]))
    # Then the manual run stays manual, and the last slot is the failed one
    assert [c.outcome for c in cells] == ["failed", "manual"]
    assert last_slot(cells) == cells[0]
    assert last_slot(cells[1:]) is None


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (None, "-"),
        (timedelta(milliseconds=850), "850 ms"),
        (timedelta(seconds=12.34), "12.3 s"),
        (timedelta(seconds=245), "4 min 5 s"),
        (timedelta(hours=2, minutes=3), "2 h 3 min"),
        (timedelta(seconds=-2), "-2.0 s"),
    ],
)
def test_durations_read_as_a_person_reads_them(delta: timedelta | None, text: str) -> None:
    assert human(delta) == text
