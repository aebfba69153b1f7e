"""Runs by trigger: backfill and catch-up runs are their own population, left out of
the default waterfall (which says so), and ``trigger`` chooses one population."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest

from cronwave_core.errors import InvalidArgument
from cronwave_waterfall import (
    RunFilter,
    build_runs,
    render_html,
    render_json,
    render_terminal,
    waterfall,
)
from cronwave_waterfall.runs import Run

from .synth import make_run

HOURS_LATE = timedelta(hours=3)
MINUTES_LATE = timedelta(minutes=10)


@pytest.fixture(scope="module")
def runs() -> list[Run]:
    """40 scheduled runs, 5 backfilled 3 h after their slot, 3 caught up 10 min after
    theirs, 2 manual triggers, and 4 whose spans name no trigger (older traces)."""
    rng = random.Random(5)
    plan = (
        [("scheduled", timedelta(0))] * 40
        + [("backfill", HOURS_LATE)] * 5
        + [("catchup", MINUTES_LATE)] * 3
        + [("manual", timedelta(0))] * 2
        + [(None, timedelta(0))] * 4
    )
    spans = [
        span
        for i, (trigger, late) in enumerate(plan)
        for span in make_run(rng, i, trigger=trigger, late_by=late).spans
    ]
    return build_runs(spans)


def test_each_run_says_its_trigger(runs: list[Run]) -> None:
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.trigger] = counts.get(run.trigger, 0) + 1
    assert counts == {"scheduled": 40, "backfill": 5, "catchup": 3, "manual": 2, "": 4}


def test_the_default_leaves_backfill_and_catchup_out_and_says_so(runs: list[Run]) -> None:
    # When the waterfall is asked for no trigger
    result = waterfall(runs)

    # Then its runs are the scheduled, manual and unsaid ones only
    assert result.runs == 46
    assert result.set_aside == {"backfill": 5, "catchup": 3}
    # and its lateness is the scheduler's (seconds at most), not the backfill's hours
    assert result.lateness is not None and result.lateness.max_ms < 1_000
    # and every rendering says what it left out, and how to see it
    note = result.set_aside_note()
    assert note.startswith("5 backfill and 3 catchup runs not counted")
    assert "--trigger backfill or --trigger catchup" in note
    assert f"note: {note}" in " ".join(render_terminal(result, width=200).split())
    assert json.loads(render_json(result))["set_aside"] == {"backfill": 5, "catchup": 3}
    assert json.loads(render_json(result))["set_aside_note"] == note
    assert note in render_html(result)


def test_a_trigger_chooses_its_own_population(runs: list[Run]) -> None:
    backfill = waterfall(runs, trigger="backfill")
    assert backfill.runs == 5 and backfill.set_aside == {}
    assert backfill.lateness is not None
    assert backfill.lateness.p50_ms >= HOURS_LATE / timedelta(milliseconds=1)
    assert "set_aside_note" in json.loads(render_json(backfill))
    assert json.loads(render_json(backfill))["selection"] == {"trigger": "backfill"}

    assert waterfall(runs, trigger="catchup").runs == 3
    assert waterfall(runs, trigger="manual").runs == 2
    scheduled = waterfall(runs, RunFilter(trigger="scheduled", last=10))
    assert scheduled.runs == 10 and scheduled.set_aside == {}


def test_last_counts_only_what_it_left_out_in_its_window(runs: list[Run]) -> None:
    # The backfilled slots are hours before every other run: the last 10 runs' window
    # holds none of them, the caught-up slots (10 min back) neither.
    assert waterfall(runs, last=10).set_aside == {}


def test_a_bad_trigger_is_refused_naming_the_rule(runs: list[Run]) -> None:
    with pytest.raises(InvalidArgument) as caught:
        waterfall(runs, trigger="cron")
    assert caught.value.message == (
        "trigger: must be one of scheduled, manual, backfill, catchup (why the run "
        "exists), got 'cron'"
    )
